// CUDA relu forward y = max(x, 0) and backward dx = dy * (y > 0), f32/f16/bf16 (ops/pointwise.cuh). Test:
// tests/plugins/cuda.
#include "ops/pointwise.cuh"

namespace fresco::cuda {

FR_CUDA_KERNEL_RUN(relu) {
  return run_pointwise1(ctx, call, "relu", ReluF{});
}

FR_CUDA_KERNEL_RUN(relu_backward) {
  return run_pointwise2(ctx, call, "relu_backward", ReluBackwardF{});
}

}  // namespace fresco::cuda
