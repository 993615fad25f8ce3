// CPU tanh forward and backward dx = dy (1 - y^2) from the output, element-wise in float; dx may alias dy.
// Test: test_pointwise.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(tanh) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "tanh");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "tanh: sizes differ");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) y[i] = std::tanh(x[i]);
    });
  });
}

FR_CPU_KERNEL_RUN(tanh_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "tanh_backward");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "tanh_backward: sizes differ");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* y = sdk::data<float>(call->in[1]);
    float* dx = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
    });
  });
}

}  // namespace fresco::cpu
