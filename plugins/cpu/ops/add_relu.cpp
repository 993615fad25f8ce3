// CPU add_relu y = max(a + b, 0) (a residual join followed by relu, fused), element-wise over equal sizes; y
// may alias a or b. Its backward is relu_backward on y. Test: test_add_gelu_flatten.cpp.
#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(add_relu) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "add_relu");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "add_relu: sizes differ");
    const float* a = sdk::data<float>(call->in[0]);
    const float* b = sdk::data<float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(n, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float v = a[i] + b[i];
        y[i] = v > 0.0f ? v : 0.0f;
      }
    });
  });
}

}  // namespace fresco::cpu
