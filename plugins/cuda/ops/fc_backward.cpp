// CUDA fc backward: dw[N,K] = dy^T x and dx[M,K] = dy w through two cuBLASLt matmuls (fp32, no TF32), db[N]
// by a deterministic column-sum kernel. Gradients are written, not accumulated. Test: tests/plugins/cuda.
#include <algorithm>

#include "ops/matmul_plan.h"

namespace fresco::cuda {

namespace {
constexpr uint64_t kMaxWorkspace = 32ull << 20;
struct FcBackwardPlan {
  MatmulPlan dw, dx;
};
void destroy_plan(FcBackwardPlan* p) {
  destroy_matmul(p->dw);
  destroy_matmul(p->dx);
  delete p;
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(fc_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "fc_backward");
    const auto& p = sdk::params<FrFcBackwardParams>(call);
    const int64_t m = sdk::rows(call->in[0]), n = sdk::cols(call->in[0]), k = sdk::cols(call->in[1]);
    FR_PLUGIN_CHECK(sdk::rows(call->in[1]) == m && sdk::rows(call->in[2]) == n && sdk::cols(call->in[2]) == k,
                    FR_ERR_INVALID_ARGUMENT, "cuda fc_backward: dy/x/w shapes disagree");
    auto* plan = new FcBackwardPlan();
    try {
      plan_matmul(ctx_of(ctx), plan->dw, true, false, n, k, m, false, kMaxWorkspace);  // dw = dy^T x
      if (p.need_dx)
        plan_matmul(ctx_of(ctx), plan->dx, false, false, m, k, n, false, kMaxWorkspace);  // dx = dy w
    } catch (...) {
      destroy_plan(plan);
      throw;
    }
    *state = plan;
    *workspace_bytes = std::max(plan->dw.workspace, plan->dx.workspace);
  });
}

FR_CUDA_KERNEL_RUN(fc_backward) {
  return sdk::guard([&] {
    const auto* plan = static_cast<const FcBackwardPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda fc_backward: run without prepare");
    const auto& p = sdk::params<FrFcBackwardParams>(call);
    const float* dy = sdk::data<float>(call->in[0]);
    const int64_t m = sdk::rows(call->in[0]), n = sdk::cols(call->in[0]);
    cudaStream_t s = stream_of(call);
    uint32_t o = 0;
    run_matmul(ctx_of(ctx), plan->dw, dy, sdk::data<float>(call->in[1]), sdk::data<float>(call->out[o++]),
               nullptr, call->workspace, call->workspace_bytes, s);
    if (p.has_bias) {
      FR_PLUGIN_CHECK(call->n_out > o, FR_ERR_INVALID_ARGUMENT,
                      "cuda fc_backward: has_bias but no db output");
      column_sums(dy, sdk::data<float>(call->out[o++]), m, n, s);
    }
    if (p.need_dx) {
      FR_PLUGIN_CHECK(call->n_out > o, FR_ERR_INVALID_ARGUMENT, "cuda fc_backward: need_dx but no dx output");
      run_matmul(ctx_of(ctx), plan->dx, dy, sdk::data<float>(call->in[2]), sdk::data<float>(call->out[o]),
                 nullptr, call->workspace, call->workspace_bytes, s);
    }
  });
}

FR_CUDA_KERNEL_DESTROY(fc_backward) {
  (void)ctx;
  destroy_plan(static_cast<FcBackwardPlan*>(state));
}

}  // namespace fresco::cuda
