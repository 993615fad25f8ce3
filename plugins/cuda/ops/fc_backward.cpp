// CUDA fc backward: dw[N,K] = dy^T x and dx[M,K] = dy w through two cuBLASLt matmuls (fp32, no TF32), db[N]
// by the dw GEMM's bias-gradient epilogue where cuBLASLt offers one (FRESCO_CUBLAS_BGRAD=0: never), else by a
// deterministic column-sum kernel; dy is first masked in place with the fused relu's output (relu_mask). Part
// 1 computes only dx, part 2 only dw and db. Gradients are written, not accumulated. Layers with at most 32
// outputs run ops/small_fc.cu's kernels instead of the GEMMs and the column sums. Test: tests/plugins/cuda.
#include <algorithm>
#include <cstdio>

#include "ops/matmul_plan.h"
#include "ops/small_fc.h"

namespace fresco::cuda {

namespace {
constexpr uint64_t kMaxWorkspace = 32ull << 20;
struct FcBackwardPlan {
  MatmulPlan dw, dx;   // unused when small
  bool small = false;  // ops/small_fc.h
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
    FR_PLUGIN_CHECK(p.part >= 0 && p.part <= 2, FR_ERR_INVALID_ARGUMENT,
                    "cuda fc_backward: part must be 0, 1 or 2, found " + std::to_string(p.part));
    const int64_t m = sdk::rows(call->in[0]), n = sdk::cols(call->in[0]), k = sdk::cols(call->in[1]);
    FR_PLUGIN_CHECK(sdk::rows(call->in[1]) == m && sdk::rows(call->in[2]) == n && sdk::cols(call->in[2]) == k,
                    FR_ERR_INVALID_ARGUMENT, "cuda fc_backward: dy/x/w shapes disagree");
    auto* plan = new FcBackwardPlan();
    // (a weight gradient whose chunk partials would exceed the GEMMs' workspace cap stays on cuBLASLt)
    const uint64_t small_ws = p.part != 1 ? small_fc_weight_grad_workspace(m, n, k) : 0;
    plan->small = small_fc_fits(ctx_of(ctx), n) && small_ws <= kMaxWorkspace;
    if (plan->small) {
      *state = plan;
      *workspace_bytes = small_ws;
      return;
    }
    try {
      if (p.part != 1) {
        // The bias gradient from the weight gradient's GEMM where cuBLASLt offers that (else a column sum).
        bool fused = false;
        if (p.has_bias && ctx_of(ctx)->fused_bias_grad) {
          try {
            plan_matmul(ctx_of(ctx), plan->dw, true, false, n, k, m, false, false, kMaxWorkspace, true);
            fused = true;
          } catch (const sdk::KernelError& e) {  // no such configuration (or the epilogue refused): sum apart
            if (ctx_of(ctx)->log_choices)
              std::fprintf(
                  stderr, "[fresco-cuda] fc weight gradient %lldx%lldx%lld: no bias-gradient epilogue (%s)\n",
                  static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m),
                  e.message.c_str());
            destroy_matmul(plan->dw);
          }
        }
        if (!fused) plan_matmul(ctx_of(ctx), plan->dw, true, false, n, k, m, false, false, kMaxWorkspace);
      }
      if (p.part == 1 || (p.part == 0 && p.need_dx))
        plan_matmul(ctx_of(ctx), plan->dx, false, false, m, k, n, false, false, kMaxWorkspace);
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
    const bool want_w = p.part != 1, want_x = p.part == 1 || (p.part == 0 && p.need_dx);
    const bool mask = p.relu_mask && p.part != 2;
    FR_PLUGIN_CHECK(!mask || (call->n_in >= 4 && sdk::numel(call->in[3]) == m * n), FR_ERR_INVALID_ARGUMENT,
                    "cuda fc_backward: relu_mask needs the relu output y [M,N] as 4th input");
    const uint32_t outs = (want_w ? (p.has_bias ? 2u : 1u) : 0u) + (want_x ? 1u : 0u);
    FR_PLUGIN_CHECK(call->n_out >= outs, FR_ERR_INVALID_ARGUMENT,
                    "cuda fc_backward: expected " + std::to_string(outs) + " outputs, found " +
                        std::to_string(call->n_out));
    {  // the outputs hold what the kernels write: dw [N,K], db [N], dx [M,K]
      const int64_t k = sdk::cols(call->in[1]);
      FR_PLUGIN_CHECK((!want_w || sdk::numel(call->out[0]) == n * k) &&
                          (!want_w || !p.has_bias || sdk::numel(call->out[1]) == n) &&
                          (!want_x || sdk::numel(call->out[outs - 1]) == m * k),
                      FR_ERR_INVALID_ARGUMENT,
                      "cuda fc_backward: dw must have N x K, db N and dx M x K values");
    }
    const float* y = mask ? sdk::data<float>(call->in[3]) : nullptr;
    float* db = want_w && p.has_bias ? sdk::data<float>(call->out[1]) : nullptr;
    const float* x = sdk::data<float>(call->in[1]);
    const float* w = sdk::data<float>(call->in[2]);
    if (plan->small) {
      const int64_t k = sdk::cols(call->in[1]);
      if (y) mask_and_column_sums(dy, y, nullptr, m, n, s);  // before the kernels read dy
      if (want_w)
        small_fc_weight_grad(dy, x, sdk::data<float>(call->out[0]), db, m, n, k, call->workspace,
                             call->workspace_bytes, s);
      if (want_x) small_fc_input_grad(dy, w, sdk::data<float>(call->out[outs - 1]), m, n, k, s);
      return;
    }
    const bool db_by_gemm = db && plan->dw.bias_grad;  // the weight gradient's GEMM writes db
    if (y || (db && !db_by_gemm))
      mask_and_column_sums(dy, y, db_by_gemm ? nullptr : db, m, n, s);  // before the GEMMs read dy
    if (want_w)
      run_matmul(ctx_of(ctx), plan->dw, dy, x, sdk::data<float>(call->out[0]), db_by_gemm ? db : nullptr,
                 call->workspace, call->workspace_bytes, s);
    if (want_x)
      run_matmul(ctx_of(ctx), plan->dx, dy, w, sdk::data<float>(call->out[outs - 1]), nullptr,
                 call->workspace, call->workspace_bytes, s);
  });
}

FR_CUDA_KERNEL_DESTROY(fc_backward) {
  (void)ctx;
  destroy_plan(static_cast<FcBackwardPlan*>(state));
}

}  // namespace fresco::cuda
