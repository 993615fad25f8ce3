// Element-wise CUDA kernels shared by the one-op files (add, gelu, silu, sigmoid, tanh): a grid-stride loop
// over a device functor with one input (forward) or two (backward: dy and x or y; add: a and b). Outputs may
// alias inputs element for element, as the CPU kernels allow.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

template <class F>
__global__ void pointwise1_kernel(const float* x, float* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = f(x[i]);
}

template <class F>
__global__ void pointwise2_kernel(const float* a, const float* b, float* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = f(a[i], b[i]);
}

template <class F>
FrError* run_pointwise1(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    pointwise1_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(call->out[0]), n, f);
    FR_CUDA_LAUNCH_CHECK();
  });
}

template <class F>
FrError* run_pointwise2(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    pointwise2_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]), sdk::data<float>(call->out[0]), n, f);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
