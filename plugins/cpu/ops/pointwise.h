// Element-wise CPU kernels shared by the one-op files (gelu, silu, sigmoid, tanh): checks arity and sizes,
// then applies a functor over fixed chunks (deterministic for any thread count). Unary: in {x}, out {y};
// binary: in {dy, x or y}, out {dx}. Outputs may alias inputs element for element.
#pragma once

#include <string>

#include "cpu_common.h"

namespace fresco::cpu {

template <class F>
FrError* run_pointwise1(const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) y[i] = f(x[i]);
    });
  });
}

template <class F>
FrError* run_pointwise2(const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    const float* a = sdk::data<float>(call->in[0]);
    const float* b = sdk::data<float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
  });
}

}  // namespace fresco::cpu
