// CUDA add_relu_backward dx = (a + b) * (y > 0): the backward of a fused add+relu join whose output gradient
// arrives in two parts (the block output read by two layers), summed and masked in one pass (f32/f16/bf16,
// ops/pointwise.cuh). Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct AddReluBackwardF {
  __device__ float operator()(float a, float b, float y) const { return y > 0.0f ? a + b : 0.0f; }
};

FR_CUDA_KERNEL_RUN(add_relu_backward) {
  return run_pointwise3(ctx, call, "add_relu_backward", AddReluBackwardF{});
}

}  // namespace fresco::cuda
