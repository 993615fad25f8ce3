// CUDA add_relu y = max(a + b, 0): a residual join and the relu after it in one pass (f32/f16/bf16,
// ops/pointwise.cuh). Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct AddReluF {
  __device__ float operator()(float a, float b) const {
    const float v = a + b;
    return v > 0.0f ? v : 0.0f;
  }
};

FR_CUDA_KERNEL_RUN(add_relu) {
  return run_pointwise2(ctx, call, "add_relu", AddReluF{});
}

}  // namespace fresco::cuda
