// The batchnorm prologue of a CUDA convolution (ops.h) where fresco's own kernels do not fuse it
// (ops/conv_plan.h; the Hopper 3x3 kernels apply it to their windows, ops/conv3x3_wgmma.h): one element-wise
// pass writes relu(fma(x, scale, shift)) rounded to x's dtype into conv2d's applied-map output, with scale
// and shift from the saved statistics as the batchnorm's own forward derives them
// (ops/batchnorm_relu_mask.cuh), so the convolution reads the very values the batchnorm's apply pass would
// have stored. Test: tests/plugins/cuda/test_cuda_low_precision_training.cpp (ConvPrologueGivesTheSameBits,
// the small residual network).
#pragma once

#include "cuda_common.h"
#include "fresco/conv_prologue.hpp"

namespace fresco::cuda {

// out [rows, c] = the prologue of x [rows, c] (f32, f16 or bf16; out may not alias x); with r (the join
// prologue's residual, x's shape and dtype) relu(fma(x, scale, shift) + r), the sum in f32 (batchnorm_add's
// bits, ops/batchnorm.cu).
void launch_conv_prologue(FrDType dtype, const void* x, void* out, int64_t rows, int64_t c,
                          const sdk::BnPrologue& bn, cudaStream_t s, const void* r = nullptr);

}  // namespace fresco::cuda
