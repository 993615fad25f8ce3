// A training batchnorm's dx from its premasked output gradient g and its gradient sums (ops.h "Gradient
// sums"), by batchnorm_backward.cu's kernels: the weight gradient's batchnorm prologue (ops.h) on the
// convolutions that do not fuse it (conv2d_backward.cpp). Test: tests/plugins/cuda/test_cuda_ops.cpp.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

// dx [rows, c] (dtype, like g and x) = a (g - b - (x - mean) k) with the coefficients of
// fresco/batchnorm_rules.h's fr_bn_grad_coefficients from gsums (f32 [2c]); coef: 3c floats of scratch.
// The launches' forms follow ctx (Context::bn_grad_dependent_launch; not null).
void launch_bn_dx_given_sums(const Context* ctx, uint32_t dtype, const void* g, const void* x,
                             const float* gamma, const float* mean, const float* invstd, const float* gsums,
                             int64_t rows, int64_t c, float* coef, void* dx, cudaStream_t s);

}  // namespace fresco::cuda
