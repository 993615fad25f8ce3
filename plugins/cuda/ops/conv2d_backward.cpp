// CUDA conv2d backward through cuDNN (ops/conv_plan.h): dw by backward-filter, dx (when need_dx) by
// backward-data, both with deterministic algorithms chosen in prepare; db as deterministic column sums of dy
// viewed as [N*P*Q, K]. Part 1 runs only backward-data, part 2 only backward-filter and db (ops.h). Written,
// not accumulated. With the batchnorm gradient epilogue (ops.h) fresco's Hopper input gradient masks dx and
// adds the batchnorm's gradient sums as it stores (ops/conv3x3_wgmma.h); other convolutions run the masking
// pass with sums after it (ops/masked_grad_sums.h, dx in place, masked by x). With the weight gradient's
// batchnorm prologue (ops.h) fresco's narrow weight gradient computes the batchnorm's dx as it stages dy
// (ops/narrow_conv.h); other convolutions get it from batchnorm_backward's pass first (ops/bn_dx.h). With the
// join epilogue (ops.h) fresco's Hopper input gradient adds the other part, masks and sums as it stores dx
// (Conv3x3JoinSums); other convolutions run add_relu_backward's pass with sums after it, in place. A compact
// input gradient (ops.h: a strided 1x1 conv's dx at dy's positions) is planned as that 1x1 conv at stride 1
// over dy's positions, whose input gradient it is. Test:
// tests/plugins/cuda/test_cuda_ops.cpp (vs the CPU), test_cuda_low_precision.cpp.
#include <algorithm>
#include <initializer_list>

#include "fresco/compact_grad.hpp"
#include "fresco/conv_backward_parts.hpp"
#include "fresco/conv_prologue.hpp"
#include "ops/bn_dx.h"
#include "ops/channel_moments.h"
#include "ops/conv3x3_wgmma.h"
#include "ops/conv_plan.h"
#include "ops/masked_grad_sums.h"
#include "ops/matmul_plan.h"
#include "ops/narrow_conv.h"

namespace fresco::cuda {

namespace {
uint64_t align256(uint64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The epilogue's workspace: the Hopper input gradient's sums partials, or the masking pass's (run after the
// convolution), from the workspace's start.
uint64_t epilogue_workspace(const Context* c, const ConvPlan& plan, const FrCall* call) {
  if (!sdk::has_conv_grad_epilogue(call) && !sdk::has_conv_join_epilogue(call)) return 0;
  if (plan.wgmma_data) return conv3x3_wgmma_partials_bytes(c->sm_count);
  const sdk::ChannelRows v = sdk::channel_rows(call->in[1], "conv2d_backward");
  return masked_grad_sums_workspace(v.rows, v.c);
}

// The weight gradient's batchnorm prologue off fresco's narrow kernels: the batchnorm's dx (dy's shape and
// dtype) at prologue_dx_at, then its 3K coefficients at prologue_coef_at, after the convolution's workspace.
uint64_t prologue_dx_at(const ConvPlan& plan) {
  return align256(plan.workspace);
}
uint64_t prologue_coef_at(const ConvPlan& plan, const FrTensor& dy) {
  return prologue_dx_at(plan) + align256(sdk::numel(dy) * sdk::float_bytes(dy.dtype, "conv2d_backward"));
}
// One batchnorm's gradient sums operands for a masking pass over x's rows.
sdk::GradSumsOperands single_grad_sums(const FrTensor& x, const void* bx, const float* mean, float* gsums) {
  const sdk::ChannelRows v = sdk::channel_rows(x, "conv2d_backward");
  sdk::GradSumsOperands g;
  g.targets = 1;
  g.x[0] = bx;
  g.mean[0] = mean;
  g.sums[0] = gsums;
  g.rows = v.rows;
  g.c = v.c;
  return g;
}
// Whether the call writes a compact input gradient (ops.h; checked there), which takes no epilogue.
bool compact_input_gradient(const FrCall* call, const FrConvBackwardParams& p,
                            const sdk::ConvBackwardOutputs& o) {
  if (!sdk::conv_compact_dx(call, p, o)) return false;
  FR_PLUGIN_CHECK(!sdk::has_conv_grad_epilogue(call) && !sdk::has_conv_join_epilogue(call),
                  FR_ERR_INVALID_ARGUMENT, "conv2d_backward: a compact input gradient takes no epilogue");
  return true;
}
uint64_t prologue_workspace(const ConvPlan& plan, const FrCall* call) {
  if (!sdk::has_wgrad_bn_prologue(call) || plan.narrow_wgrad) return 0;
  return prologue_coef_at(plan, call->in[0]) + 3 * sdk::dim_or_1(call->in[0], 3) * sizeof(float);
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(conv2d_backward) {
  FrConvBackwardParams p{};
  unsigned dirs = 0;
  FrConvParams conv{};
  FrTensor x{};
  if (FrError* e = sdk::guard([&] {
        p = sdk::params<FrConvBackwardParams>(call);  // inside the guard: a bad params blob is an error
        const sdk::ConvBackwardOutputs o = sdk::conv_backward_outputs(p);
        dirs = (o.dw >= 0 ? kConvBackwardFilter : 0u) | (o.dx >= 0 ? kConvBackwardData : 0u);
        sdk::check_conv_backward_operands(call, o);
        FR_PLUGIN_CHECK(o.db < 0 || call->in[0].dtype == FR_F32, FR_ERR_UNSUPPORTED,
                        "cuda conv2d_backward: a bias is supported in f32 only");
        conv = p.conv;
        x = call->in[1];
        if (compact_input_gradient(call, p, o)) {  // the 1x1 at stride 1 over dy's positions (ops.h)
          conv.stride_h = conv.stride_w = 1;
          x = call->out[o.dx];
        }
      }))
    return e;
  if (FrError* e = conv_prepare_state(ctx, call, "conv2d_backward", conv, x, call->in[2], call->in[0], dirs,
                                      state, workspace_bytes))
    return e;
  return sdk::guard([&] {
    const auto& plan = *static_cast<const ConvPlan*>(*state);
    *workspace_bytes = std::max(
        {*workspace_bytes, epilogue_workspace(ctx_of(ctx), plan, call), prologue_workspace(plan, call)});
  });
}

FR_CUDA_KERNEL_RUN(conv2d_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const auto* plan = static_cast<const ConvPlan*>(call->state);
    FR_PLUGIN_CHECK(plan, FR_ERR_INVALID_ARGUMENT, "cuda conv2d_backward: run without prepare");
    FrTensor dy = call->in[0];
    const FrTensor &x = call->in[1], &w = call->in[2];
    const sdk::ConvBackwardOutputs o = sdk::conv_backward_outputs(p);
    cudaStream_t st = stream_of(call);
    Context* c = ctx_of(ctx);
    const sdk::BnWgradPrologue bn = sdk::wgrad_bn_prologue(call);
    if (bn.y && !plan->narrow_wgrad) {  // the batchnorm's dx into the workspace, then the plain path on it
      FR_PLUGIN_CHECK(call->workspace_bytes >= prologue_workspace(*plan, call), FR_ERR_INVALID_ARGUMENT,
                      "cuda conv2d_backward: workspace too small for the batchnorm gradient prologue");
      char* ws = static_cast<char*>(call->workspace);
      char* at = ws + prologue_dx_at(*plan);
      const int64_t k = sdk::dim_or_1(dy, 3);
      auto* coef = reinterpret_cast<float*>(ws + prologue_coef_at(*plan, dy));
      launch_bn_dx_given_sums(c, dy.dtype, dy.data, bn.y, bn.gamma, bn.mean, bn.invstd, bn.gsums,
                              sdk::numel(dy) / k, k, coef, at, st);
      dy.data = at;
    }
    if (o.db >= 0) {
      const int64_t k = sdk::dim_or_1(dy, 3);
      FR_PLUGIN_CHECK(sdk::numel(call->out[o.db]) == k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: db must have K elements");
      mask_and_column_sums(sdk::data<float>(dy), nullptr, sdk::data<float>(call->out[o.db]),
                           sdk::numel(dy) / k, k, st);
    }
    if (o.dw >= 0) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o.dw]) == sdk::numel(w) && call->out[o.dw].dtype == w.dtype,
                      FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: dw " + sdk::shape_str(call->out[o.dw]) + " differs from w " +
                          sdk::shape_str(w) + " (or its dtype does)");
      if (bn.y && plan->narrow_wgrad) {  // the batchnorm's dx computed as the kernel stages dy
        const NarrowBnDy nb{bn.y, bn.gamma, bn.mean, bn.invstd, bn.gsums};
        launch_narrow_wgrad(plan->shape, plan->dtype, dy.data, x.data, call->out[o.dw].data, call->workspace,
                            st, &nb);
      } else {
        // (with the prologue's dx after it, the convolution gets only the workspace before that)
        run_conv_backward_filter(c, *plan, dy.data, x.data, call->out[o.dw].data, call->workspace,
                                 bn.y ? prologue_dx_at(*plan) : call->workspace_bytes, st);
      }
    }
    if (o.dx >= 0 && compact_input_gradient(call, p, o)) {  // planned as the 1x1 at stride 1 (prepare)
      run_conv_backward_data(c, *plan, dy.data, w.data, call->out[o.dx].data, call->workspace,
                             call->workspace_bytes, st);
    } else if (o.dx >= 0) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o.dx]) == sdk::numel(x) && call->out[o.dx].dtype == x.dtype,
                      FR_ERR_INVALID_ARGUMENT, "conv2d_backward: dx must have the shape and dtype of x");
      void* dx = call->out[o.dx].data;
      const sdk::BnGradEpilogue e = sdk::conv_grad_epilogue(call, o.dx, o.count);
      const sdk::ConvJoinEpilogue j = sdk::conv_join_epilogue(call, o.dx, o.count);
      FR_PLUGIN_CHECK((!e.gsums && !j.gsums) || call->workspace_bytes >= epilogue_workspace(c, *plan, call),
                      FR_ERR_INVALID_ARGUMENT, "cuda conv2d_backward: workspace too small for the epilogue");
      if (j.gsums) {             // the join's sum, mask and gradient sums
        if (plan->wgmma_data) {  // as the kernel stores dx
          auto* part = static_cast<double*>(call->workspace);
          const Conv3x3JoinSums sums{j.b, x.data, j.bx, j.mean, part};
          const int blocks = launch_conv3x3_wgmma_backward_data(plan->shape, plan->dtype, dy.data, w.data, dx,
                                                                c->sm_count, st, nullptr, &sums);
          launch_sums_finalize(c, blocks, plan->shape.c, part, j.gsums, st);
          return;
        }
        run_conv_backward_data(c, *plan, dy.data, w.data, dx, call->workspace, call->workspace_bytes, st);
        launch_masked_grad_sums(c, x.dtype, dx, j.b, x.data, single_grad_sums(x, j.bx, j.mean, j.gsums), dx,
                                call->workspace, st);
        return;
      }
      if (e.gsums && plan->wgmma_data) {  // masked and summed as the kernel stores dx
        auto* part = static_cast<double*>(call->workspace);
        const Conv3x3GradSums sums{e.bn, e.bx, part};
        const int blocks = launch_conv3x3_wgmma_backward_data(plan->shape, plan->dtype, dy.data, w.data, dx,
                                                              c->sm_count, st, &sums);
        launch_sums_finalize(c, blocks, plan->shape.c, part, e.gsums, st);
      } else {
        run_conv_backward_data(c, *plan, dy.data, w.data, dx, call->workspace, call->workspace_bytes, st);
        if (e.gsums)  // the masking pass with sums, in place
          launch_masked_grad_sums(c, x.dtype, dx, nullptr, x.data,
                                  single_grad_sums(x, e.bx, e.bn.mean, e.gsums), dx, call->workspace, st);
      }
    }
  });
}

FR_CUDA_KERNEL_DESTROY(conv2d_backward) {
  (void)ctx;
  conv_destroy_state(state);
}

}  // namespace fresco::cuda
