// CUDA add_relu_backward dx = (a + b) * (y > 0): the backward of a fused add+relu join whose output gradient
// arrives in two parts (the block output read by two layers), summed and masked in one pass (f32/f16/bf16,
// ops/pointwise.cuh); with x and save_mean it also writes gsums (ops/masked_grad_sums.h); b may be compact
// (ops.h: FrAddReluBackwardParams). Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "ops/masked_grad_sums.h"
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct AddReluBackwardF {
  __device__ float operator()(float a, float b, float y) const { return y > 0.0f ? a + b : 0.0f; }
};

FR_CUDA_KERNEL_PREPARE(add_relu_backward) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] { *workspace_bytes = masked_grad_sums_prepare(call, 3, "add_relu_backward"); });
}

FR_CUDA_KERNEL_RUN(add_relu_backward) {
  bool done = false;
  if (FrError* e = sdk::guard([&] {
        done = run_masked_grad_sums(ctx_of(ctx), call, 3, "add_relu_backward");
        if (done) return;
        const sdk::CompactPart part = sdk::add_relu_backward_part(call, "add_relu_backward");
        if (!part.compact()) return;
        launch_compact_add_relu_backward(call->out[0].dtype, call->in[0].data, call->in[1].data,
                                         call->in[2].data, call->out[0].data, part.n * part.h * part.w,
                                         part.c, compact_b(part), ctx_of(ctx)->sm_count, stream_of(call));
        done = true;
      }))
    return e;
  return done ? nullptr : run_pointwise3(ctx, call, "add_relu_backward", AddReluBackwardF{});
}

}  // namespace fresco::cuda
