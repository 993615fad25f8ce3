// Convolutions whose input has few channels (a network's stem: 3 image channels, 1 for grayscale), on fp16 /
// bf16 maps with fp32 accumulation on tensor cores (mma.sync m16n8k16), as fresco's own kernels. cuDNN has no
// fast kernel for them: ResNet-18's CIFAR stem (3 -> 64 channels, 3x3, batch 512) took 75 us forward plus a
// 25 us statistics pass, and 107 us for its weight gradient with padding copies and a split-K reduction, on
// the H200 (docs/performance.md), where writing the 67 MB output takes about 20 us.
// A block takes whole output rows of one image and first copies their zero-padded input window to shared
// memory. Forward: implicit GEMM over [output positions, C*R*S taps] x [taps, K], the taps gathered from that
// tile, the weights as B fragments through ldmatrix; the output staged in shared memory and written in
// 16-byte rows; optionally the per-channel sums of y as stored (conv2d's sums output, ops.h) from the same
// registers, per block in double, then added over blocks in a fixed order. Weight gradient: dw[k, t] = sum
// over positions of dy[., k] * x_col[., t], dy staged in shared memory and read transposed by ldmatrix, x_col
// from the tile, per-block partials added over the blocks in a fixed order. Block counts depend on the shape
// only, so results are the same on every run.
// Limits (narrow_conv_fits): f16 or bf16, one group, C*R*S <= 32 taps, K = 16, 32 or 64, and one output row's
// input window (zero-padded) within 27 KB of shared memory.
// Test: tests/plugins/cuda/test_cuda_low_precision_conv.cpp (NarrowInputConvolutions).
#pragma once

#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"

namespace fresco::cuda {

bool narrow_conv_fits(const sdk::ConvShape& g, FrDType dtype);

// Workspace bytes of the forward with sums (without sums it needs none) and of the weight gradient.
uint64_t narrow_forward_workspace(const sdk::ConvShape& g);
uint64_t narrow_wgrad_workspace(const sdk::ConvShape& g);

// y = conv(x, w); `sums` (2K floats: the sums of y's channels, then of their squares) when not null.
// ctx (may be null) sets the sums finalize's form (launch_sums_finalize, channel_moments.h).
void launch_narrow_forward(const Context* ctx, const sdk::ConvShape& g, FrDType dtype, const void* x,
                           const void* w, void* y, float* sums, void* ws, cudaStream_t s);
// The batchnorm gradient prologue of the weight gradient (ops.h): dy is a batchnorm's premasked output
// gradient, y this conv's output (that batchnorm's input), with the batchnorm's gamma, saved mean and invstd
// (f32 [K]) and gradient sums (f32 [2K]); the kernel uses the batchnorm's dx as batchnorm_backward computes
// it.
struct NarrowBnDy {
  const void* y = nullptr;
  const float *gamma = nullptr, *mean = nullptr, *invstd = nullptr, *gsums = nullptr;
};
// dw (K x R x S x C, in dtype) = the weight gradient from dy (with `bn`: from that batchnorm's dx) and x.
void launch_narrow_wgrad(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* x, void* dw,
                         void* ws, cudaStream_t s, const NarrowBnDy* bn = nullptr);

}  // namespace fresco::cuda
