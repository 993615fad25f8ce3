// CPU add_relu_backward dx = (a + b) * (y > 0): the backward of a fused add+relu join whose output gradient
// arrives in two parts, summed and masked in one pass; dx may alias a or b. With x and save_mean as fourth
// and fifth inputs it also writes gsums (ops.h, "Gradient sums"; ops/grad_sums.h). Tests:
// test_add_gelu_flatten.cpp, test_batchnorm.cpp (gradient sums).
#include "cpu_common.h"
#include "ops/grad_sums.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

FR_CPU_KERNEL_PREPARE(add_relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "add_relu_backward");
    *state = nullptr;
    *workspace_bytes = masking_pass_workspace(call, 3, "add_relu_backward");
  });
}

FR_CPU_KERNEL_RUN(add_relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "add_relu_backward");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(
        sdk::numel(call->in[1]) == n && sdk::numel(call->in[2]) == n && sdk::numel(call->out[0]) == n,
        FR_ERR_INVALID_ARGUMENT, "add_relu_backward: sizes differ");
    const float* a = sdk::data<float>(call->in[0]);
    const float* b = sdk::data<float>(call->in[1]);
    const float* y = sdk::data<float>(call->in[2]);
    float* dx = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) dx[i] = relu_masked(a[i] + b[i], y[i]);
    });
    masking_pass_sums(call, 3, "add_relu_backward");
  });
}

}  // namespace fresco::cpu
