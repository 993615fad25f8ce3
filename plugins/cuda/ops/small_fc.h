// fc layers with few outputs (n <= kSmallFcMaxOutputs, a classifier head such as 256 -> 10) in strict fp32
// without cuBLASLt: its GEMM kernels tile the output, and an output only 10 wide leaves most of each tile
// and most of the GPU idle (ResNet/MLP heads measured 10-27 us per call for a few MFLOP). Here a warp owns a
// row of the forward, a thread an element of the input gradient, and the weight gradient is summed in two
// deterministic passes (row chunks, then the chunks in order). Results depend only on the shapes. Used by
// ops/fc.cpp and ops/fc_backward.cpp unless FRESCO_CUDA_SMALL_FC=0. Test: tests/plugins/cuda (vs the CPU).
#pragma once

#include <cstdint>

#include "cuda_common.h"

namespace fresco::cuda {

constexpr int64_t kSmallFcMaxOutputs = 32;

inline bool small_fc_fits(const Context* ctx, int64_t n) {
  return ctx->small_fc && n >= 1 && n <= kSmallFcMaxOutputs;
}

// y[m,n] = x[m,k] w[n,k]^T (+ b[n]) (relu when `relu`); b may be null.
void small_fc_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
                      int64_t k, bool relu, cudaStream_t s);
// dx[m,k] = dy[m,n] w[n,k].
void small_fc_input_grad(const float* dy, const float* w, float* dx, int64_t m, int64_t n, int64_t k,
                         cudaStream_t s);
// Workspace bytes small_fc_weight_grad needs for these shapes.
uint64_t small_fc_weight_grad_workspace(int64_t m, int64_t n, int64_t k);
// dw[n,k] = dy^T x and, when db is not null, db[n] = column sums of dy.
void small_fc_weight_grad(const float* dy, const float* x, float* dw, float* db, int64_t m, int64_t n,
                          int64_t k, void* workspace, uint64_t workspace_bytes, cudaStream_t s);

}  // namespace fresco::cuda
