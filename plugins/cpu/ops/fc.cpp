// CPU fc forward: y[M,N] = x[M,K] w[N,K]^T (+ b) (+ relu), one packed GEMM; bias is written first, GEMM adds.
// Test: tests/plugins/cpu/test_fc.cpp (reference + finite differences).
#include "cpu_common.h"
#include "gemm.h"
#include "ops/dense_math.h"

namespace fresco::cpu {

void fc_forward_f32(const float* x, const float* w, const float* b, float* yd, int64_t m, int64_t n,
                    int64_t k, bool relu, void* workspace, uint64_t workspace_bytes) {
  float beta = 0.0f;
  if (b) {
    parallel_chunks(m, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) yd[r * n + j] = b[j];
    });
    beta = 1.0f;
  }
  sgemm(dense_gemm(false, true, m, n, k, x, w, yd, beta), workspace, workspace_bytes);
  if (relu)
    parallel_chunks(m * n, 1 << 14, [&](int64_t a, int64_t c) {
      for (int64_t i = a; i < c; ++i) yd[i] = yd[i] > 0.0f ? yd[i] : 0.0f;
    });
}

FR_CPU_KERNEL_PREPARE(fc) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "fc");
    *state = nullptr;
    const auto& x = call->in[0];
    const auto& w = call->in[1];
    const int64_t m = sdk::rows(x), k = sdk::cols(x), n = sdk::rows(w);
    FR_PLUGIN_CHECK(sdk::cols(w) == k, FR_ERR_INVALID_ARGUMENT,
                    "fc: weight has " + std::to_string(sdk::cols(w)) + " inputs, x has " + std::to_string(k));
    FR_PLUGIN_CHECK(sdk::rows(call->out[0]) == m && sdk::cols(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "fc: output shape mismatch");
    *workspace_bytes = gemm_workspace_bytes(m, n, k, max_threads());
  });
}

FR_CPU_KERNEL_RUN(fc) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrFcParams>(call);
    const auto& x = call->in[0];
    const auto& w = call->in[1];
    const auto& y = call->out[0];
    const int64_t m = sdk::rows(x), k = sdk::cols(x), n = sdk::rows(w);
    FR_PLUGIN_CHECK(!p.has_bias || call->n_in >= 3, FR_ERR_INVALID_ARGUMENT,
                    "fc: has_bias but no bias tensor");
    fc_forward_f32(sdk::data<float>(x), sdk::data<float>(w),
                   p.has_bias ? sdk::data<float>(call->in[2]) : nullptr, sdk::data<float>(y), m, n, k,
                   p.fused_relu != 0, call->workspace, call->workspace_bytes);
  });
}

}  // namespace fresco::cpu
