// CUDA conv2d backward through cuDNN (ops/conv_plan.h): dw by backward-filter, dx (when need_dx) by
// backward-data, both with deterministic algorithms chosen in prepare; db as deterministic column sums of dy
// viewed as [N*P*Q, K]. Part 1 runs only backward-data, part 2 only backward-filter and db (ops.h). Written,
// not accumulated. Test: tests/plugins/cuda/test_cuda_ops.cpp (vs the CPU).
#include "fresco/conv_backward_parts.hpp"
#include "ops/conv_plan.h"
#include "ops/matmul_plan.h"

namespace fresco::cuda {

FR_CUDA_KERNEL_PREPARE(conv2d_backward) {
  const auto& p = sdk::params<FrConvBackwardParams>(call);
  sdk::ConvBackwardOutputs o;
  if (FrError* e = sdk::guard([&] {
        o = sdk::conv_backward_outputs(p);
        sdk::expect_arity(call, 3, o.count, 0, 0, "conv2d_backward");
        FR_PLUGIN_CHECK(o.db < 0 || call->in[0].dtype == FR_F32, FR_ERR_UNSUPPORTED,
                        "cuda conv2d_backward: a bias is supported in f32 only");
      }))
    return e;
  const unsigned dirs = (o.dw >= 0 ? kConvBackwardFilter : 0u) | (o.dx >= 0 ? kConvBackwardData : 0u);
  return conv_prepare_state(ctx, call, "conv2d_backward", p.conv, call->in[1], call->in[2], call->in[0], dirs,
                            state, workspace_bytes);
}

FR_CUDA_KERNEL_RUN(conv2d_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const auto* plan = static_cast<const ConvPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda conv2d_backward: run without prepare");
    const FrTensor &dy = call->in[0], &x = call->in[1], &w = call->in[2];
    const sdk::ConvBackwardOutputs o = sdk::conv_backward_outputs(p);
    cudaStream_t st = stream_of(call);
    Context* c = ctx_of(ctx);
    if (o.db >= 0) {
      const int64_t k = sdk::dim_or_1(dy, 3);
      FR_PLUGIN_CHECK(sdk::numel(call->out[o.db]) == k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: db must have K elements");
      mask_and_column_sums(sdk::data<float>(dy), nullptr, sdk::data<float>(call->out[o.db]),
                           sdk::numel(dy) / k, k, st);
    }
    if (o.dw >= 0) {
      FR_PLUGIN_CHECK(
          sdk::numel(call->out[o.dw]) == sdk::numel(w), FR_ERR_INVALID_ARGUMENT,
          "conv2d_backward: dw " + sdk::shape_str(call->out[o.dw]) + " differs from w " + sdk::shape_str(w));
      run_conv_backward_filter(c, *plan, dy.data, x.data, call->out[o.dw].data, call->workspace,
                               call->workspace_bytes, st);
    }
    if (o.dx >= 0) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o.dx]) == sdk::numel(x), FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: dx must have the shape of x");
      run_conv_backward_data(c, *plan, dy.data, w.data, call->out[o.dx].data, call->workspace,
                             call->workspace_bytes, st);
    }
  });
}

FR_CUDA_KERNEL_DESTROY(conv2d_backward) {
  (void)ctx;
  conv_destroy_state(state);
}

}  // namespace fresco::cuda
