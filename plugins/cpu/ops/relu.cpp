// CPU relu forward y = max(x, 0) and backward dx = dy * (y > 0); with x and save_mean as third and fourth
// inputs the backward also writes gsums (ops.h, "Gradient sums"; ops/grad_sums.h). Tests:
// tests/plugins/cpu/test_activations.cpp, test_batchnorm.cpp (gradient sums).
#include "cpu_common.h"
#include "ops/grad_sums.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(relu) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "relu");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "relu: in/out sizes differ");
    parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    });
  });
}

FR_CPU_KERNEL_PREPARE(relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "relu_backward");
    *state = nullptr;
    *workspace_bytes = masking_pass_workspace(call, 2, "relu_backward");
  });
}

FR_CPU_KERNEL_RUN(relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "relu_backward");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* y = sdk::data<float>(call->in[1]);
    float* dx = sdk::data<float>(call->out[0]);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "relu_backward: sizes differ");
    parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) dx[i] = relu_masked(dy[i], y[i]);
    });
    masking_pass_sums(call, 2, "relu_backward");
  });
}

}  // namespace fresco::cpu
