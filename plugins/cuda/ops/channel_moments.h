// Per-channel sums of x and x^2 over the rows of an f32 / f16 / bf16 map [rows, C], by the coalesced,
// deterministic kernels of channel_sums.cuh: batchnorm's statistics pass (chunk partials for its finalize)
// and conv2d's sums output (ops.h), when cuDNN's fused statistics are not the faster way
// (ops/conv_engine.h). Test: tests/plugins/cuda/test_cuda_ops.cpp.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

// part[(chunk * C + c) * 2 + {0, 1}] = the chunk's sums of x and x^2 (double), chunks of
// channel_chunks(rows, c) (channel_sums.cuh).
void launch_channel_moments(uint32_t dtype, const void* x, int64_t rows, int64_t c, double* part,
                            cudaStream_t s);

// conv2d's sums output: sums[c] = sum of y[.., c], sums[C + c] = the sum of its squares (per-thread sums in
// float for 16-bit maps, in double for f32; block and chunk sums in double in a fixed order), rounded to f32
// once; `ws` holds conv_sums_workspace(rows, c) bytes. ctx (may be null: plain launches, 16-channel
// finalize) sets the finalize's form, as below.
uint64_t conv_sums_workspace(int64_t rows, int64_t c);
void launch_conv_sums(const Context* ctx, uint32_t dtype, const void* y, int64_t rows, int64_t c, void* ws,
                      float* sums, cudaStream_t s);

// sums[c], sums[C + c] = the two partials of channel c added over `chunks` chunks in a fixed order (the
// layout above: part[(chunk * C + c) * 2 + {0, 1}]), rounded to f32 once: the finalize of conv2d's sums for
// kernels that write such partials themselves (ops/narrow_conv.h). ctx (may be null) gives the channels per
// block (Context::grad_finalize_channels) and whether it launches as a programmatic dependent of the kernel
// before it (Context::bn_grad_dependent_launch); the same sums either way.
void launch_sums_finalize(const Context* ctx, int64_t chunks, int64_t c, const double* part, float* sums,
                          cudaStream_t s);
// The same for n = 1 or 2 maps' partials of one shape (part[i] -> sums[i]) in one launch.
void launch_sums_finalize(const Context* ctx, int64_t chunks, int64_t c, const double* const* part,
                          float* const* sums, int n, cudaStream_t s);

// The Context of a finalize launch that runs as a programmatic dependent (launch_after_prior), or null.
inline const Context* grad_dependent(const Context* ctx, int level = 1) {
  return ctx && ctx->bn_grad_dependent_launch >= level ? ctx : nullptr;
}

}  // namespace fresco::cuda
