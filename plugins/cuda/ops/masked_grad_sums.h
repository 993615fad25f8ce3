// The masking passes that hand batchnorm its gradient sums (ops.h, "Gradient sums"): relu_backward and
// add_relu_backward with x and save_mean write dx = (a [+ b]) * (y > 0) and, from the same registers, the
// per-channel sums of dx as stored and of dx (x - mean), by batchnorm_backward's own partials code
// (ops/channel_sums.cuh: the same chunks, per-thread accumulators and order as its sums pass), added over the
// chunks in double and rounded to f32 once. One pass over the map fewer than the masking pass followed by
// batchnorm's sums pass. A second (x, save_mean) pair (both branches of a projection join end in a batchnorm)
// adds its own sums in the same pass. add_relu_backward's b may be compact (ops.h: a strided 1x1 shortcut's
// input gradient at its output positions; the other positions add +0). Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernels), test_cuda_low_precision.cpp.
#pragma once

#include "cuda_common.h"
#include "fresco/compact_grad.hpp"
#include "fresco/grad_sums_checks.hpp"
#include "ops/strided_rows.h"

namespace fresco::cuda {

// Workspace bytes of the pass over a [rows, c] map.
uint64_t masked_grad_sums_workspace(int64_t rows, int64_t c);

// Where a compact part b adds (ops.h, add_relu_backward's FrAddReluBackwardParams), or none (h == 0).
inline StridedRows compact_b(const sdk::CompactPart& part) {
  return part.compact() ? strided_rows(part.n * part.h * part.w, part.h, part.w, part.stride_h, part.stride_w)
                        : StridedRows{};
}

// dx = (a + b) * (y > 0) (b may be null: a * (y > 0); compact with cb.h > 0), a gsums per target of g as
// above; x's dtype is dx's (f32, f16 or bf16). `ws` holds g.targets * masked_grad_sums_workspace(rows, c)
// bytes. ctx (may be null) sets the sums finalize's form (launch_sums_finalize, channel_moments.h).
void launch_masked_grad_sums(const Context* ctx, uint32_t dtype, const void* a, const void* b, const void* y,
                             const sdk::GradSumsOperands& g, void* dx, void* ws, cudaStream_t s,
                             const StridedRows& cb = {});

// add_relu_backward without gradient sums and a compact b: dx = (a + b) * (y > 0) over a [rows, c] map.
void launch_compact_add_relu_backward(uint32_t dtype, const void* a, const void* b, const void* y, void* dx,
                                      int64_t rows, int64_t c, const StridedRows& cb, int sm_count,
                                      cudaStream_t s);

// The run of a masking pass with gsums (x at in[x_at]): checks the operands and launches; false when the call
// has no gsums output (the caller runs its plain kernel).
bool run_masked_grad_sums(const Context* ctx, const FrCall* call, uint32_t x_at, const char* op);

// Its prepare: the workspace (0 without gsums).
uint64_t masked_grad_sums_prepare(const FrCall* call, uint32_t x_at, const char* op);

}  // namespace fresco::cuda
