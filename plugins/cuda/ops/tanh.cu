// CUDA tanh; backward dx = dy (1 - y^2) from y. Test: tests/plugins/cuda/test_cuda_ops.cpp.
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct TanhF {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhBackwardF {
  __device__ float operator()(float dy, float y) const { return dy * (1.0f - y * y); }
};

FR_CUDA_KERNEL_RUN(tanh) {
  return run_pointwise1(ctx, call, "tanh", TanhF{});
}
FR_CUDA_KERNEL_RUN(tanh_backward) {
  return run_pointwise2(ctx, call, "tanh_backward", TanhBackwardF{});
}

}  // namespace fresco::cuda
