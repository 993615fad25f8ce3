// CPU SiLU forward y = x sigmoid(x) and backward dx = dy s (1 + x (1 - s)), s = sigmoid(x), element-wise in
// float; dx may alias dy. Test: test_pointwise.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(silu) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "silu");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "silu: sizes differ");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
    });
  });
}

FR_CPU_KERNEL_RUN(silu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "silu_backward");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "silu_backward: sizes differ");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* x = sdk::data<float>(call->in[1]);
    float* dx = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-x[i]));
        dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
      }
    });
  });
}

}  // namespace fresco::cpu
