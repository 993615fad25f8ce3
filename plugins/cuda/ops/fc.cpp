// CUDA fc forward: y[M,N] = x[M,K] w[N,K]^T + b (+ relu) through one cuBLASLt matmul with a bias/relu
// epilogue (fp32, no TF32). The algorithm is chosen in prepare(), before capture. Test:
// tests/plugins/cuda/test_cuda_ops.cpp (vs the CPU).
#include "ops/matmul_plan.h"

namespace fresco::cuda {

namespace {
constexpr uint64_t kMaxWorkspace = 32ull << 20;
}

FR_CUDA_KERNEL_PREPARE(fc) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, "fc");
    const auto& p = sdk::params<FrFcParams>(call);
    const int64_t m = sdk::rows(call->in[0]), k = sdk::cols(call->in[0]), n = sdk::rows(call->in[1]);
    FR_PLUGIN_CHECK(
        sdk::cols(call->in[1]) == k && sdk::rows(call->out[0]) == m && sdk::cols(call->out[0]) == n,
        FR_ERR_INVALID_ARGUMENT, "cuda fc: x/w/y shapes disagree");
    auto* plan = new MatmulPlan();
    try {
      plan_matmul(ctx_of(ctx), *plan, false, true, m, n, k, p.has_bias != 0, p.fused_relu != 0,
                  kMaxWorkspace);
    } catch (...) {
      destroy_matmul(*plan);
      delete plan;
      throw;
    }
    *state = plan;
    *workspace_bytes = plan->workspace;
  });
}

FR_CUDA_KERNEL_RUN(fc) {
  return sdk::guard([&] {
    const auto* plan = static_cast<const MatmulPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda fc: run without prepare");
    const float* bias = plan->bias ? sdk::data<float>(call->in[2]) : nullptr;
    run_matmul(ctx_of(ctx), *plan, sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]),
               sdk::data<float>(call->out[0]), bias, call->workspace, call->workspace_bytes, stream_of(call));
  });
}

FR_CUDA_KERNEL_DESTROY(fc) {
  (void)ctx;
  auto* plan = static_cast<MatmulPlan*>(state);
  destroy_matmul(*plan);
  delete plan;
}

}  // namespace fresco::cuda
