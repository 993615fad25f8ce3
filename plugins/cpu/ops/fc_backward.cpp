// CPU fc backward: dw[N,K] = dy^T x, db[N] = column sums of dy (fixed row order), dx[M,K] = dy w; part 1
// computes only dx, part 2 only dw and db (see FrFcBackwardParams). Gradients are written, not accumulated.
// With relu_mask, dy (w.r.t. the fused relu's output) is first zeroed in place where y <= 0. Test:
// tests/plugins/cpu/test_fc.cpp (finite differences).
#include <algorithm>

#include "cpu_common.h"
#include "gemm.h"
#include "ops/dense_math.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

void fc_input_grad_f32(const float* dy, const float* w, float* dx, int64_t m, int64_t n, int64_t k,
                       void* workspace, uint64_t workspace_bytes) {
  sgemm(dense_gemm(false, false, m, k, n, dy, w, dx), workspace, workspace_bytes);  // dx = dy w
}

void relu_mask_f32(float* g, const float* y, int64_t n) {
  parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) g[i] = relu_masked(g[i], y[i]);
  });
}

FR_CPU_KERNEL_PREPARE(fc_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "fc_backward");
    *state = nullptr;
    const int64_t m = sdk::rows(call->in[0]), n = sdk::cols(call->in[0]), k = sdk::cols(call->in[1]);
    FR_PLUGIN_CHECK(sdk::rows(call->in[1]) == m && sdk::rows(call->in[2]) == n && sdk::cols(call->in[2]) == k,
                    FR_ERR_INVALID_ARGUMENT, "fc_backward: dy/x/w shapes disagree");
    *workspace_bytes =
        std::max(gemm_workspace_bytes(n, k, m, max_threads()), gemm_workspace_bytes(m, k, n, max_threads()));
  });
}

FR_CPU_KERNEL_RUN(fc_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrFcBackwardParams>(call);
    const auto& dy = call->in[0];
    const auto& x = call->in[1];
    const auto& w = call->in[2];
    const int64_t m = sdk::rows(dy), n = sdk::cols(dy), k = sdk::cols(x);
    FR_PLUGIN_CHECK(p.part >= 0 && p.part <= 2, FR_ERR_INVALID_ARGUMENT,
                    "fc_backward: part must be 0, 1 or 2, found " + std::to_string(p.part));
    const bool want_w = p.part != 1, want_x = p.part == 1 || (p.part == 0 && p.need_dx);
    float* dyd = sdk::data<float>(dy);
    if (p.relu_mask && p.part != 2) {
      FR_PLUGIN_CHECK(call->n_in >= 4 && sdk::numel(call->in[3]) == m * n, FR_ERR_INVALID_ARGUMENT,
                      "fc_backward: relu_mask needs the relu output y [M,N] as 4th input");
      relu_mask_f32(dyd, sdk::data<float>(call->in[3]), m * n);
    }
    uint32_t o = 0;
    if (want_w) {
      sgemm(dense_gemm(true, false, n, k, m, dyd, sdk::data<float>(x), sdk::data<float>(call->out[o++])),
            call->workspace, call->workspace_bytes);  // dw = dy^T x
      if (p.has_bias) {
        FR_PLUGIN_CHECK(call->n_out > o, FR_ERR_INVALID_ARGUMENT, "fc_backward: has_bias but no db output");
        float* db = sdk::data<float>(call->out[o++]);
        parallel_chunks(n, 64, [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) db[j] = 0.0f;
          for (int64_t r = 0; r < m; ++r)
            for (int64_t j = j0; j < j1; ++j) db[j] += dyd[r * n + j];
        });
      }
    }
    if (want_x) {
      FR_PLUGIN_CHECK(call->n_out > o, FR_ERR_INVALID_ARGUMENT, "fc_backward: need_dx but no dx output");
      fc_input_grad_f32(dyd, sdk::data<float>(w), sdk::data<float>(call->out[o]), m, n, k, call->workspace,
                        call->workspace_bytes);
    }
  });
}

}  // namespace fresco::cpu
