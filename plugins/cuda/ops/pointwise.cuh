// Element-wise CUDA kernels shared by the one-op files (relu, add, gelu, silu, sigmoid, tanh): a grid-stride
// loop over a device functor with one input (forward) or two (backward: dy and x or y; add: a and b), for
// f32, f16 and bf16 tensors (computed in float, ops/dtype.cuh). Outputs may alias inputs element for
// element, as the CPU kernels allow.
#pragma once

#include "ops/dtype.cuh"

namespace fresco::cuda {

template <class T, class F>
__global__ void pointwise1_kernel(const T* x, T* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = from_f<T>(f(to_f(x[i])));
}

template <class T, class F>
__global__ void pointwise2_kernel(const T* a, const T* b, T* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = from_f<T>(f(to_f(a[i]), to_f(b[i])));
}

template <class F>
FrError* run_pointwise1(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    expect_same_dtype(call, call->out[0].dtype, name);
    with_float_type(call->out[0].dtype, name, [&](auto tag) {
      using T = decltype(tag);
      pointwise1_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), n, f);
    });
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
    expect_same_dtype(call, call->out[0].dtype, name);
    with_float_type(call->out[0].dtype, name, [&](auto tag) {
      using T = decltype(tag);
      pointwise2_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->in[1]), sdk::data<T>(call->out[0]), n, f);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
