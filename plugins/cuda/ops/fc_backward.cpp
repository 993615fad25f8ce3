// CUDA fc backward: dw[N,K] = dy^T x and dx[M,K] = dy w through two cuBLASLt matmuls (fp32, no TF32), db[N]
// by a deterministic column-sum kernel, which first masks dy in place with the fused relu's output
// (relu_mask). Gradients are written, not accumulated. Test: tests/plugins/cuda.
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
      plan_matmul(ctx_of(ctx), plan->dw, true, false, n, k, m, false, false, kMaxWorkspace);  // dw = dy^T x
      if (p.need_dx)
        plan_matmul(ctx_of(ctx), plan->dx, false, false, m, k, n, false, false, kMaxWorkspace);  // dx = dy w
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
    float* dy = sdk::data<float>(call->in[0]);
    const int64_t m = sdk::rows(call->in[0]), n = sdk::cols(call->in[0]);
    cudaStream_t s = stream_of(call);
    FR_PLUGIN_CHECK(!p.relu_mask || (call->n_in >= 4 && sdk::numel(call->in[3]) == m * n),
                    FR_ERR_INVALID_ARGUMENT,
                    "cuda fc_backward: relu_mask needs the relu output y [M,N] as 4th input");
    FR_PLUGIN_CHECK(!p.has_bias || call->n_out >= 2, FR_ERR_INVALID_ARGUMENT,
                    "cuda fc_backward: has_bias but no db output");
    const float* y = p.relu_mask ? sdk::data<float>(call->in[3]) : nullptr;
    float* db = p.has_bias ? sdk::data<float>(call->out[1]) : nullptr;
    if (y || db) mask_and_column_sums(dy, y, db, m, n, s);  // before both GEMMs read dy
    uint32_t o = p.has_bias ? 2 : 1;
    run_matmul(ctx_of(ctx), plan->dw, dy, sdk::data<float>(call->in[1]), sdk::data<float>(call->out[0]),
               nullptr, call->workspace, call->workspace_bytes, s);
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
