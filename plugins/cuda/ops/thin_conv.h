// Convolutions with very few input channels (an image stem: C <= 4, e.g. 3x3 over RGB) in f16 / bf16, by
// own direct kernels instead of cuDNN, whose tensor-core kernels pad such inputs to wide tiles (ResNet-18's
// 3 -> 64 stem at batch 512 measured 100 us forward and 122 us weight gradient for 1.8 GFLOP each). The
// forward gives each thread 8 output channels of one pixel with the weights in shared memory; the weight
// gradient sums fixed chunks of 1024 output pixels per block (im2col rows staged in shared memory), then the
// chunks in order: deterministic, results depend only on the shapes. fp32 accumulation. Used by
// ops/conv_plan.cpp for the forward and weight-gradient directions unless FRESCO_CUDA_THIN_CONV=0; the input
// gradient of such a layer (never needed for a first layer) stays on cuDNN. Test:
// tests/plugins/cuda/test_cuda_low_precision.cpp (against the f32 cuDNN path).
#pragma once

#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"

namespace fresco::cuda {

// Whether geometry g in dtype runs on these kernels.
bool thin_conv_fits(const Context* ctx, const sdk::ConvShape& g, FrDType dtype);

void thin_conv_forward(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w, void* y,
                       cudaStream_t s);
// Workspace bytes of thin_conv_backward_filter.
uint64_t thin_conv_filter_workspace(const sdk::ConvShape& g);
// dw [K, R, S, C] (dtype) from dy [N, P, Q, K] and x [N, H, W, C].
void thin_conv_backward_filter(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* x,
                               void* dw, void* workspace, cudaStream_t s);

}  // namespace fresco::cuda
