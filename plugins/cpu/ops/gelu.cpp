// CPU exact GELU forward y = 0.5 x (1 + erf(x / sqrt 2)) and backward dx = dy * (Phi(x) + x phi(x)),
// element-wise in float (erff/expf); dx may alias dy. Test: test_add_gelu_flatten.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(gelu) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "gelu");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "gelu: sizes differ");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
    });
  });
}

FR_CPU_KERNEL_RUN(gelu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "gelu_backward");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "gelu_backward: sizes differ");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* x = sdk::data<float>(call->in[1]);
    float* dx = sdk::data<float>(call->out[0]);
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    constexpr float kInvSqrt2Pi = 0.39894228040143268f;
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {
        const float v = x[i];
        const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
        const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
        dx[i] = dy[i] * (cdf + v * pdf);
      }
    });
  });
}

}  // namespace fresco::cpu
