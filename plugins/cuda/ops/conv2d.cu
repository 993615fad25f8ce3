// CUDA conv2d forward (NHWC, weights [K, R, S, C/g], optional bias) through cuDNN (ops/conv_plan.h: algorithm
// chosen in prepare, before capture; deterministic; strict fp32), then the bias added per output channel by
// a small kernel. The optional sums output (ops.h) comes from cuDNN's fused statistics or a separate pass,
// whichever measured faster at prepare (ops/conv_plan.h). With a batchnorm prologue (ops.h) x is the
// batchnorm's input and its applied map the second output (written by fresco's Hopper kernels as they read
// their windows, else by a pass of its own: ops/conv_prologue.h), the join prologue's residual added first.
// Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "fresco/conv_prologue.hpp"
#include "fresco/conv_stats_checks.hpp"
#include "ops/conv_plan.h"

namespace fresco::cuda {

namespace {
__global__ void add_channel_bias_kernel(float* y, const float* b, int64_t total, int64_t k) {
  FR_CUDA_GRID_LOOP(i, total) y[i] += b[i % k];
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(conv2d) {
  FrConvParams p{};
  if (FrError* e = sdk::guard([&] {
        p = sdk::params<FrConvParams>(call);  // inside the guard: a bad params blob is an error
        sdk::expect_arity(call, p.has_bias ? 3 : 2, 1, 0, 0, "conv2d");
        sdk::conv_prologue(call);  // checks only
        FR_PLUGIN_CHECK(!p.has_bias || call->in[0].dtype == FR_F32, FR_ERR_UNSUPPORTED,
                        "cuda conv2d: a bias is supported in f32 only");
        sdk::conv_sums_output(call, sdk::dim_or_1(call->out[0], 3));
      }))
    return e;
  return conv_prepare_state(ctx, call, "conv2d", p, call->in[0], call->in[1], call->out[0],
                            kConvForward | (sdk::has_conv_sums(call) ? kConvForwardSums : 0u), state,
                            workspace_bytes);
}

FR_CUDA_KERNEL_RUN(conv2d) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvParams>(call);
    const auto* plan = static_cast<const ConvPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda conv2d: run without prepare");
    const FrTensor& y = call->out[0];
    void* applied = nullptr;
    const void* residual = nullptr;
    const sdk::BnPrologue bn = sdk::conv_prologue(call, &applied, &residual);
    run_conv_forward(ctx_of(ctx), *plan, call->in[0].data, call->in[1].data, y.data, call->workspace,
                     call->workspace_bytes, stream_of(call), sdk::conv_sums_output(call, sdk::dim_or_1(y, 3)),
                     bn.gamma ? &bn : nullptr, applied, residual);
    if (p.has_bias) {
      const int64_t k = sdk::dim_or_1(y, 3), total = sdk::numel(y);
      FR_PLUGIN_CHECK(sdk::numel(call->in[2]) == k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d: bias must have K elements");
      add_channel_bias_kernel<<<grid_for(total, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
          sdk::data<float>(y), sdk::data<float>(call->in[2]), total, k);
      FR_CUDA_LAUNCH_CHECK();
    }
  });
}

FR_CUDA_KERNEL_DESTROY(conv2d) {
  (void)ctx;
  conv_destroy_state(state);
}

}  // namespace fresco::cuda
