// CUDA SiLU y = x sigmoid(x); backward dx = dy s (1 + x (1 - s)) from x. Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct SiluF {
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct SiluBackwardF {
  __device__ float operator()(float dy, float x) const {
    const float s = 1.0f / (1.0f + expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  }
};

FR_CUDA_KERNEL_RUN(silu) {
  return run_pointwise1(ctx, call, "silu", SiluF{});
}
FR_CUDA_KERNEL_RUN(silu_backward) {
  return run_pointwise2(ctx, call, "silu_backward", SiluBackwardF{});
}

}  // namespace fresco::cuda
