// CUDA relu forward y = max(x, 0) and backward dx = dy * (y > 0); grid-stride loops. Test:
// tests/plugins/cuda.
#include "cuda_common.h"

namespace fresco::cuda {

namespace {
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void relu_backward_kernel(const float* __restrict__ dy, const float* __restrict__ y,
                                     float* __restrict__ dx, int64_t n) {
  FR_CUDA_GRID_LOOP(i, n)
  dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
}  // namespace

FR_CUDA_KERNEL_RUN(relu) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "relu");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "relu: in/out sizes differ");
    relu_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(call->out[0]), n);
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "relu_backward");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "relu_backward: sizes differ");
    relu_backward_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]), sdk::data<float>(call->out[0]), n);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
