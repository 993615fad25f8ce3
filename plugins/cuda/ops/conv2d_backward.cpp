// CUDA conv2d backward through cuDNN (ops/conv_plan.h): dw by backward-filter, dx (when need_dx) by
// backward-data, both with deterministic algorithms chosen in prepare; db as deterministic column sums of dy
// viewed as [N*P*Q, K]. Written, not accumulated. Test: tests/plugins/cuda/test_cuda_ops.cpp (vs the CPU).
#include "ops/conv_plan.h"
#include "ops/matmul_plan.h"

namespace fresco::cuda {

namespace {
uint32_t outputs_of(const FrConvBackwardParams& p) {
  return 1u + (p.conv.has_bias ? 1u : 0u) + (p.need_dx ? 1u : 0u);
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(conv2d_backward) {
  const auto& p = sdk::params<FrConvBackwardParams>(call);
  if (FrError* e = sdk::guard([&] {
        sdk::expect_arity(call, 3, outputs_of(p), 0, 0, "conv2d_backward");
        FR_PLUGIN_CHECK(!p.conv.has_bias || call->in[0].dtype == FR_F32, FR_ERR_UNSUPPORTED,
                        "cuda conv2d_backward: a bias is supported in f32 only");
      }))
    return e;
  const unsigned dirs = kConvBackwardFilter | (p.need_dx ? kConvBackwardData : 0u);
  return conv_prepare_state(ctx, call, "conv2d_backward", p.conv, call->in[1], call->in[2], call->in[0], dirs,
                            state, workspace_bytes);
}

FR_CUDA_KERNEL_RUN(conv2d_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const auto* plan = static_cast<const ConvPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda conv2d_backward: run without prepare");
    const FrTensor &dy = call->in[0], &x = call->in[1], &w = call->in[2];
    FR_PLUGIN_CHECK(
        sdk::numel(call->out[0]) == sdk::numel(w), FR_ERR_INVALID_ARGUMENT,
        "conv2d_backward: dw " + sdk::shape_str(call->out[0]) + " differs from w " + sdk::shape_str(w));
    cudaStream_t st = stream_of(call);
    Context* c = ctx_of(ctx);
    uint32_t o = 1;
    if (p.conv.has_bias) {
      const int64_t k = sdk::dim_or_1(dy, 3);
      FR_PLUGIN_CHECK(sdk::numel(call->out[o]) == k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: db must have K elements");
      mask_and_column_sums(sdk::data<float>(dy), nullptr, sdk::data<float>(call->out[o++]),
                           sdk::numel(dy) / k, k, st);
    }
    run_conv_backward_filter(c, *plan, dy.data, x.data, call->out[0].data, call->workspace,
                             call->workspace_bytes, st);
    if (p.need_dx) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o]) == sdk::numel(x), FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: dx must have the shape of x");
      run_conv_backward_data(c, *plan, dy.data, w.data, call->out[o].data, call->workspace,
                             call->workspace_bytes, st);
    }
  });
}

FR_CUDA_KERNEL_DESTROY(conv2d_backward) {
  (void)ctx;
  conv_destroy_state(state);
}

}  // namespace fresco::cuda
