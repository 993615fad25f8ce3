// CUDA add y = a + b (residual joins, gradient sums). Test: tests/plugins/cuda/test_cuda_ops.cpp.
#include "ops/pointwise.cuh"

namespace fresco::cuda {

struct AddF {
  __device__ float operator()(float a, float b) const { return a + b; }
};

FR_CUDA_KERNEL_RUN(add) {
  return run_pointwise2(ctx, call, "add", AddF{});
}

}  // namespace fresco::cuda
