// CUDA sigmoid y = 1 / (1 + exp(-x)); backward dx = dy y (1 - y) from y. Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct SigmoidF {
  __device__ float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct SigmoidBackwardF {
  __device__ float operator()(float dy, float y) const { return dy * y * (1.0f - y); }
};

FR_CUDA_KERNEL_RUN(sigmoid) {
  return run_pointwise1(ctx, call, "sigmoid", SigmoidF{});
}
FR_CUDA_KERNEL_RUN(sigmoid_backward) {
  return run_pointwise2(ctx, call, "sigmoid_backward", SigmoidBackwardF{});
}

}  // namespace fresco::cuda
