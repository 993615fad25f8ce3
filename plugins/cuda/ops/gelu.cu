// CUDA exact GELU y = 0.5 x (1 + erf(x / sqrt 2)); backward dx = dy (Phi(x) + x phi(x)) from x.
// Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernels).
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct GeluF {
  __device__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
struct GeluBackwardF {
  __device__ float operator()(float dy, float x) const {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};

FR_CUDA_KERNEL_RUN(gelu) {
  return run_pointwise1(ctx, call, "gelu", GeluF{});
}
FR_CUDA_KERNEL_RUN(gelu_backward) {
  return run_pointwise2(ctx, call, "gelu_backward", GeluBackwardF{});
}

}  // namespace fresco::cuda
