// CUDA relu forward y = max(x, 0) and backward dx = dy * (y > 0), f32/f16/bf16 (ops/pointwise.cuh); the
// backward with x and save_mean also writes gsums (ops/masked_grad_sums.h). Test: tests/plugins/cuda.
#include "ops/masked_grad_sums.h"
#include "ops/pointwise.cuh"

namespace fresco::cuda {

FR_CUDA_KERNEL_RUN(relu) {
  return run_pointwise1(ctx, call, "relu", ReluF{});
}

FR_CUDA_KERNEL_PREPARE(relu_backward) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] { *workspace_bytes = masked_grad_sums_prepare(call, 2, "relu_backward"); });
}

FR_CUDA_KERNEL_RUN(relu_backward) {
  bool done = false;
  if (FrError* e = sdk::guard([&] { done = run_masked_grad_sums(ctx_of(ctx), call, 2, "relu_backward"); }))
    return e;
  return done ? nullptr : run_pointwise2(ctx, call, "relu_backward", ReluBackwardF{});
}

}  // namespace fresco::cuda
