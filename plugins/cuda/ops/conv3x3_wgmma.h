// fresco's own 3x3 convolution for 64 -> 64 channels on maps 32 positions wide (ResNet's CIFAR stage 1),
// fp16 / bf16 with fp32 accumulation, on Hopper's warpgroup MMA (sm_90a): the forward, optionally with
// batchnorm's per-channel sums of y as stored, the input gradient (the same kernel on dy, reading the weights
// flipped and transposed) and the weight gradient (ops/conv3x3_wgmma_wgrad.cu). cuDNN
// runs this shape at about 430 TFLOP/s (90 us forward at batch 512 on the H200, without the sums); this
// kernel runs it in 68-73 us with them (bench/conv3x3_probe.cu, docs/performance.md).
//
// Persistent blocks of three warpgroups. Two MMA warpgroups hold all 64 x 576 weights as wgmma's A operand in
// registers (144 per thread) and each computes tiles of 4 output rows of one image: per row 36 m64n32k16
// wgmmas over the input window (6 rows x 34 columns x 64 channels, zero-padded) as B through descriptors,
// taking turns with the other MMA warpgroup (named barriers) so one's epilogue runs beside the other's
// wgmmas, then the row rounded to T through stmatrix into a staging buffer, batchnorm's channel sums added
// from the same rounded pairs (per thread in float over its rows). The third warpgroup (few registers) brings
// each tile's window by TMA (eight 4-d tensor copies, one per 8-channel chunk; the halo zero-filled by the
// copy engine; three buffers per MMA warpgroup) and stores the staged rows as 16-byte vectors. Hand-offs
// through mbarriers. Per block the sums are added over lanes and the two MMA warpgroups in a fixed order, in
// double (the block partials of channel_moments.h, finished by launch_sums_finalize). Tiles go to blocks by
// index only, so results are the same on every run on one machine. With a batchnorm prologue (ops.h) the
// forward reads the batchnorm's input and each MMA warpgroup rewrites its next window in shared memory while
// its wgmmas run, storing the tile's rows of the applied map from the same registers (Conv3x3Prologue). With
// the batchnorm gradient epilogue the input gradient masks each row by that batchnorm's relu (recomputed from
// its input, loaded by each MMA thread while the row's wgmmas run, two rows ahead into L2) and adds the
// batchnorm's two gradient sums in place of the forward's (Conv3x3GradSums): 100 us against 70 without, where
// the batchnorm's own sums pass took 78-80 us in the step. With the join epilogue (Conv3x3JoinSums) each row
// is added to a residual join's other gradient part and masked by the relu both read, as add_relu_backward
// does, with a batchnorm's gradient sums: the three rows come by TMA (whole 128-byte lines, swizzled) into
// two slots per MMA warpgroup, issued by the helper two rows ahead: 110-111 us against 69-75 for the plain
// input gradient (bench/conv3x3_probe.cu), where the pass it replaces took 128-131 us in the step.
// Measured choices (bench/conv3x3_probe.cu, docs/performance.md): the sums in the MMA warpgroups rather than
// the helper (4-6 us faster), and, with them, turns rather than free issue (1.5-3 us faster; without them
// free issue was 3-4 us faster). Limits (conv3x3_wgmma_fits): f16 or bf16, 3x3, stride 1, padding 1, dilation
// 1, one group, C = K = 64, W = 32, H a multiple of 4. Tests: tests/plugins/cuda/ops/test_conv3x3_wgmma.cpp
// (the kernels against a double reference; the prologue against the host's applied map),
// tests/plugins/cuda/test_cuda_low_precision_conv.cpp (Hopper3x3Convolutions: through the plugin;
// ConvPrologueGivesTheSameBits).
#pragma once

#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"
#include "fresco/conv_prologue.hpp"

namespace fresco::cuda {

// Whether this build holds the kernels and device `device` (compute capability 9.0) can run them.
bool conv3x3_wgmma_available(int device);
bool conv3x3_wgmma_fits(const sdk::ConvShape& g, FrDType dtype);

// Bytes of block partials the forward with sums writes (sm_count blocks at most).
uint64_t conv3x3_wgmma_partials_bytes(int sm_count);

// How the two MMA warpgroups issue their rows: taking turns (ping-pong) or freely. kConv3x3Schedule is the
// product's; the other is timed by bench/conv3x3_probe.cu and checked by the kernel test.
enum class Conv3x3Schedule { kTurns, kFree };
inline constexpr Conv3x3Schedule kConv3x3Schedule = Conv3x3Schedule::kTurns;

// The batchnorm a convolution may apply to its input first (ops.h, conv2d's batchnorm prologue): x is then
// the batchnorm's input, and the forward convolves relu(fma(x, scale, shift)) rounded to T (scale and shift
// from the saved statistics as batchnorm_relu_mask.cuh derives them), the values the batchnorm's apply pass
// would have stored, with the padding still zero; `applied` (x's size, optional) receives them. Each MMA
// warpgroup rewrites the window of its next tile in shared memory while its wgmmas run. f32 [64] each,
// device pointers.
using Conv3x3Prologue = sdk::BnPrologue;

// y = conv(x, w); with `part` not null also the per-block sums of y as stored (double, laid out as
// channel_moments.h's partials). Returns the number of blocks (partials) written. With `residual` (the join
// prologue, ops.h; needs `prologue` and `applied`) the prologue convolves relu(fma(x, scale, shift) + r),
// the sum in f32 (batchnorm_add's bits), r (x's shape, 16-byte aligned) copied by each MMA thread into shared
// memory (cp.async) one prologue part ahead of the window rewrite that reads it.
int launch_conv3x3_wgmma_forward(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w,
                                 void* y, double* part, int sm_count, cudaStream_t s,
                                 Conv3x3Schedule schedule = kConv3x3Schedule,
                                 const Conv3x3Prologue* prologue = nullptr, void* applied = nullptr,
                                 const void* residual = nullptr);
// The input gradient's batchnorm epilogue (ops.h, conv2d_backward's gradient sums): x of the convolution is
// the output of a training batchnorm with fused relu whose input is bx (x's shape and dtype); dx is written
// masked by that relu (recomputed from bx as batchnorm_relu_mask.cuh does: the bits of dx * (x > 0)), and
// `part` receives the per-block sums of the masked dx as stored and of it times (bx - mean), laid out as the
// forward's sums partials (conv3x3_wgmma_partials_bytes; finished by launch_sums_finalize).
struct Conv3x3GradSums {
  Conv3x3Prologue bn;
  const void* bx;
  double* part;
};
// dx = the input gradient of conv(x, w) from dy (written, not accumulated): the forward kernel on dy with
// the weights read flipped (turned by 180 degrees, inputs and outputs swapped). Returns the number of blocks
// (partials written with `sums`).
// The input gradient's join epilogue (ops.h, add_relu_backward folded into conv2d_backward): x of the
// convolution is also read by a residual join's other branch, whose gradient part is b, and both read the
// output of a relu (`mask`, x's shape and dtype); dx is written as add_relu_backward writes it (the input
// gradient rounded to T, b added, masked where mask <= 0, rounded again), and `part` receives the per-block
// sums of that dx and of it times (x - mean), `x` the batchnorm's input before that relu and `mean` its saved
// mean (f32 [64]), laid out as Conv3x3GradSums's partials.
struct Conv3x3JoinSums {
  const void *b, *mask, *x;
  const float* mean;
  double* part;
};
int launch_conv3x3_wgmma_backward_data(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* w,
                                       void* dx, int sm_count, cudaStream_t s,
                                       const Conv3x3GradSums* sums = nullptr,
                                       const Conv3x3JoinSums* join = nullptr);

// dw (K x 3 x 3 x C, in dtype) = the weight gradient from dy and x (ops/conv3x3_wgmma_wgrad.cu), written;
// `ws` holds conv3x3_wgmma_wgrad_workspace bytes (the blocks' partial sums).
uint64_t conv3x3_wgmma_wgrad_workspace(const sdk::ConvShape& g, int sm_count);
void launch_conv3x3_wgmma_backward_filter(const sdk::ConvShape& g, FrDType dtype, const void* dy,
                                          const void* x, void* dw, void* ws, int sm_count, cudaStream_t s);

}  // namespace fresco::cuda
