// conv: 2-D convolution over NHWC maps, weight [K, R, S, C/groups] (the first trainable conv in W_FIRST_CONV,
// the others in W_DEEP_CONV; a bias, when asked, with the 1-D no-decay kinds in W_FC_BIAS). Backward gives
// dw, db and dx (not for the first trainable layer). In training its forward may apply the batchnorm it
// reads (CompileOptions::conv_prologue): it then reads the batchnorm's input with its four prologue operands
// and writes the batchnorm's output as its second output (ops.h); the backward reads that as usual, and, when
// it is that output's only reader (CompileOptions::grad_sums), writes the batchnorm's masked output gradient
// and gradient sums as its input gradient (ops.h). The first conv's weight gradient may apply the backward of
// the batchnorm that reads its output (CompileOptions::conv_prologue with grad_sums; ops.h, the batchnorm
// gradient prologue). Tested by the golden cases,
// tests/core/test_graph_atlas.cpp and tests/core/test_conv_prologue_plan.cpp. In training a stride-2
// projection shortcut may read its join's subsampled output at stride 1
// (CompileOptions::subsampled_shortcuts: the caller passes that map as x).
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

namespace {
// training: a conv that reads its join's subsampled map (CompileOptions::subsampled_shortcuts) runs at
// stride 1 over it
FrConvParams params_of(const LayerDescriptor& l, bool training) {
  FrConvParams p{};
  p.kh = p.kw = static_cast<int32_t>(l.spec.k);
  p.stride_h = p.stride_w =
      training && l.reads_subsample ? 1 : static_cast<int32_t>(l.spec.stride > 0 ? l.spec.stride : 1);
  p.pad_h = p.pad_w = static_cast<int32_t>(l.spec.pad);
  p.dil_h = p.dil_w = static_cast<int32_t>(l.spec.dilation);
  p.groups = static_cast<int32_t>(l.spec.groups);
  p.has_bias = l.spec.bias ? 1 : 0;
  return p;
}
}  // namespace

class ConvRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    const std::string where = "layer " + l.spec.path + " (conv)";
    const FrConvParams p = params_of(l, false);
    FRESCO_CHECK(l.spec.out > 0 && p.kh > 0, ErrorCode::kBadConfig, where + ": out and k must be positive");
    FRESCO_CHECK(in.c % p.groups == 0 && l.spec.out % p.groups == 0, ErrorCode::kBadConfig,
                 where + ": groups " + std::to_string(p.groups) + " must divide the " + std::to_string(in.c) +
                     " input and " + std::to_string(l.spec.out) + " output channels");
    const int64_t eff = static_cast<int64_t>(p.dil_h) * (p.kh - 1) + 1;
    const int64_t oh = (in.h + 2 * p.pad_h - eff) / p.stride_h + 1,
                  ow = (in.w + 2 * p.pad_w - eff) / p.stride_w + 1;
    FRESCO_CHECK(in.h + 2 * p.pad_h >= eff && in.w + 2 * p.pad_w >= eff && oh > 0 && ow > 0,
                 ErrorCode::kBadConfig,
                 where + ": a " + std::to_string(p.kh) + "x" + std::to_string(p.kw) + " window" +
                     (eff != p.kh ? " (" + std::to_string(eff) + "x" + std::to_string(eff) +
                                        " with dilation " + std::to_string(p.dil_h) + ")"
                                  : std::string()) +
                     " does not fit the " + in.str() + " input with padding " + std::to_string(p.pad_h));
    return Shape{1, oh, ow, l.spec.out};
  }
  bool has_params() const override { return true; }
  void alloc_params(LayerDescriptor& l, MemoryPlan& plan) const override {
    const int64_t k = l.spec.k, cin = l.in_sample.c / l.spec.groups;
    l.weight = plan.alloc_param(l.first_param_layer ? ParamKind::FIRST_CONV : ParamKind::DEEP_CONV,
                                Shape{l.spec.out, k, k, cin}, l.name + ".weight", l.index);
    if (l.spec.bias)
      l.bias = plan.alloc_param(ParamKind::FC_BIAS, Shape{1, 1, 1, l.spec.out}, l.name + ".bias", l.index);
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y,
               bool training) const override {
    // the A copy of the weight in mixed precision
    const bool prologue = training && l.prologue_bn >= 0;  // x is then the batchnorm's output it writes
    GraphNode n = compute_node(
        FR_OP_CONV2D, l.name,
        {prologue ? l.prologue_input : x, l.compute_weight != kNoTensor ? l.compute_weight : l.weight}, {y});
    if (l.spec.bias) n.in.push_back(l.bias);
    if (prologue) {
      n.in.insert(n.in.end(), l.prologue.begin(), l.prologue.end());
      if (l.prologue_residual != kNoTensor) n.in.push_back(l.prologue_residual);  // the join prologue
      n.out.push_back(x);
    }
    if (training && l.sums != kNoTensor) n.out.push_back(l.sums);  // for the batchnorm that reads y
    cx.add(std::move(n)).with_params(params_of(l, training));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    const bool low =
        l.compute_weight != kNoTensor;  // mixed precision: A weight, G16 gradient (GRAD_CAST casts it)
    std::vector<TensorId> in = {dy, x, low ? l.compute_weight : l.weight};
    // the first conv: dy is the output gradient of the batchnorm that reads y, whose dx the weight gradient
    // computes (ops.h, conv2d_backward's batchnorm gradient prologue)
    if (l.wgrad_prologue_bn >= 0) {
      FRESCO_CHECK(dx == kNoTensor && l.wgrad_prologue[3] != kNoTensor, ErrorCode::kInternal,
                   l.name + ": the batchnorm gradient prologue is for a weight gradient with gradient sums");
      in.push_back(y);
      in.insert(in.end(), l.wgrad_prologue.begin(), l.wgrad_prologue.end());
    }
    // CompileOptions::grad_sums with a prologue: dx is the applied batchnorm's masked output gradient,
    // written with its two gradient sums (ops.h, conv2d_backward's batchnorm gradient epilogue)
    const bool epilogue = l.grad_sums_bn >= 0;
    FRESCO_CHECK(!epilogue || (dx != kNoTensor && l.prologue_input != kNoTensor && l.grad_sums != kNoTensor),
                 ErrorCode::kInternal,
                 l.name + ": the batchnorm gradient epilogue needs dx and its operands");
    // CompileOptions::join_epilogue: dx is the sum of two gradient parts, masked by x (a relu's output), with
    // a batchnorm's two gradient sums (ops.h, conv2d_backward's join epilogue)
    const bool join = l.join_epilogue_of >= 0;
    FRESCO_CHECK(!join || (dx != kNoTensor && !epilogue && l.join_epilogue[0] != kNoTensor &&
                           l.grad_sums != kNoTensor),
                 ErrorCode::kInternal, l.name + ": the join epilogue needs dx and its operands");
    auto with_epilogue = [&](GraphNode n) {
      if (join) {
        n.in.insert(n.in.end(), l.join_epilogue.begin(), l.join_epilogue.end());
        n.out.push_back(l.grad_sums);
      }
      if (!epilogue) return n;
      n.in.push_back(l.prologue_input);
      n.in.insert(n.in.end(), l.prologue.begin(), l.prologue.end());
      n.out.push_back(l.grad_sums);
      return n;
    };
    std::vector<TensorId> grads = {low ? l.grad_weight_low : l.grad_weight};
    if (l.spec.bias) grads.push_back(l.grad_bias);
    FrConvBackwardParams p{};
    p.conv = params_of(l, true);
    p.need_dx = dx != kNoTensor ? 1 : 0;
    if (splits_weight_gradient(cx, dx)) {
      // The input gradient on the main stream, after the previous weight gradient has finished (which bounds
      // how long the side stream keeps its operands); this weight gradient beside the layers below.
      GraphNode input = with_epilogue(compute_node(FR_OP_CONV2D_BACKWARD, l.name, in, {dx}));
      p.part = 1;
      input.with_params(p);
      GraphNode weight = compute_node(FR_OP_CONV2D_BACKWARD, l.name, in, grads);
      p.part = 2;
      weight.with_params(p);
      const int64_t lag_max = cx.options ? cx.options->conv_join_lag_max : 0;
      input.join_lag = lag_max > 0 && l.in_sample.per_sample() <= lag_max;
      add_split_backward(cx, std::move(input), std::move(weight), true);
      return;
    }
    GraphNode n = compute_node(FR_OP_CONV2D_BACKWARD, l.name, in, grads);
    if (dx != kNoTensor) n.out.push_back(dx);
    cx.add(with_epilogue(std::move(n))).with_params(p);
  }
};

const LayerRule& conv_rule() {
  static const ConvRule r;
  return r;
}

}  // namespace fresco::layers
