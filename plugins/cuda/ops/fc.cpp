// CUDA fc forward: y[M,N] = x[M,K] w[N,K]^T + b (+ relu) through one cuBLASLt matmul with a bias/relu
// epilogue (fp32, no TF32); layers with at most 32 outputs run ops/small_fc.cu's kernel instead. The
// algorithm is chosen in prepare(), before capture. Test: tests/plugins/cuda/test_cuda_ops.cpp (vs the CPU).
#include "ops/matmul_plan.h"
#include "ops/small_fc.h"

namespace fresco::cuda {

namespace {
constexpr uint64_t kMaxWorkspace = 32ull << 20;
struct FcPlan {
  MatmulPlan gemm;     // unused when small
  bool small = false;  // ops/small_fc.h
};
void destroy_plan(FcPlan* p) {
  destroy_matmul(p->gemm);
  delete p;
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(fc) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "fc");
    const auto& p = sdk::params<FrFcParams>(call);
    const int64_t m = sdk::rows(call->in[0]), k = sdk::cols(call->in[0]), n = sdk::rows(call->in[1]);
    FR_PLUGIN_CHECK(
        sdk::cols(call->in[1]) == k && sdk::rows(call->out[0]) == m && sdk::cols(call->out[0]) == n,
        FR_ERR_INVALID_ARGUMENT, "cuda fc: x/w/y shapes disagree");
    FR_PLUGIN_CHECK(!p.has_bias || (call->n_in >= 3 && sdk::numel(call->in[2]) == n), FR_ERR_INVALID_ARGUMENT,
                    "cuda fc: has_bias needs a bias input of N = " + std::to_string(n) + " values");
    auto* plan = new FcPlan();
    plan->small = small_fc_fits(ctx_of(ctx), n);
    try {
      if (!plan->small)
        plan_matmul(ctx_of(ctx), plan->gemm, false, true, m, n, k, p.has_bias != 0, p.fused_relu != 0,
                    kMaxWorkspace);
    } catch (...) {
      destroy_plan(plan);
      throw;
    }
    *state = plan;
    *workspace_bytes = plan->gemm.workspace;
  });
}

FR_CUDA_KERNEL_RUN(fc) {
  return sdk::guard([&] {
    const auto* plan = static_cast<const FcPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda fc: run without prepare");
    const auto& p = sdk::params<FrFcParams>(call);
    const float* bias = p.has_bias ? sdk::data<float>(call->in[2]) : nullptr;
    const float* x = sdk::data<float>(call->in[0]);
    const float* w = sdk::data<float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    if (plan->small)
      small_fc_forward(x, w, bias, y, sdk::rows(call->in[0]), sdk::rows(call->in[1]), sdk::cols(call->in[0]),
                       p.fused_relu != 0, stream_of(call));
    else
      run_matmul(ctx_of(ctx), plan->gemm, x, w, y, bias, call->workspace, call->workspace_bytes,
                 stream_of(call));
  });
}

FR_CUDA_KERNEL_DESTROY(fc) {
  (void)ctx;
  destroy_plan(static_cast<FcPlan*>(state));
}

}  // namespace fresco::cuda
