// fc: y = x W^T + b over the flattened per-sample input (HWC order); backward gives dW, db and dx.
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class FcRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    FRESCO_CHECK(
        l.spec.out > 0, ErrorCode::kBadConfig,
        "layer " + l.spec.path + " (fc): width must be positive, found " + std::to_string(l.spec.out));
    (void)in;
    return Shape{1, 1, 1, l.spec.out};
  }
  bool has_params() const override { return true; }
  void alloc_params(LayerDescriptor& l, MemoryPlan& plan) const override {
    l.weight = plan.alloc_fc_weight(l.spec.out, l.in_sample.per_sample(), l.name, l.index);
    if (l.spec.bias) l.bias = plan.alloc_fc_bias(l.spec.out, l.name, l.index);
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(FR_OP_FC, l.name, {x, l.weight}, {y});
    if (l.spec.bias) n.in.push_back(l.bias);
    cx.add(std::move(n)).with_params(FrFcParams{l.spec.bias ? 1 : 0, l.fused_relu ? 1 : 0});
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    // dy is w.r.t. the fused relu's output: the kernel masks it with y, unless the fused head did already
    const int bias = l.spec.bias ? 1 : 0, mask = l.fused_relu && !l.grad_premasked ? 1 : 0;
    std::vector<TensorId> in = {dy, x, l.weight};
    if (mask) in.push_back(y);
    if (splits_weight_gradient(cx, dx)) {
      // masks dy, then dx = dy w on the main stream; dw, db from the masked dy beside the next layers' input
      // gradients
      GraphNode input = compute_node(FR_OP_FC_BACKWARD, l.name, in, {dx});
      input.with_params(FrFcBackwardParams{bias, 1, mask, 1});
      add_split_backward(cx, std::move(input), fc_weight_gradient_node(l, x, dy, true), false);
      return;
    }
    std::vector<TensorId> grads = {l.grad_weight};
    if (l.spec.bias) grads.push_back(l.grad_bias);
    GraphNode n = compute_node(FR_OP_FC_BACKWARD, l.name, in, grads);
    if (dx != kNoTensor) n.out.push_back(dx);
    cx.add(std::move(n)).with_params(FrFcBackwardParams{bias, dx != kNoTensor ? 1 : 0, mask, 0});
  }
};

GraphNode fc_weight_gradient_node(const LayerDescriptor& l, TensorId x, TensorId dy, bool side) {
  std::vector<TensorId> grads = {l.grad_weight};
  if (l.spec.bias) grads.push_back(l.grad_bias);
  GraphNode w = compute_node(FR_OP_FC_BACKWARD, l.name, {dy, x, l.weight}, grads);
  w.with_params(FrFcBackwardParams{l.spec.bias ? 1 : 0, 0, 0, 2});
  w.side_stream = side;
  return w;
}

const LayerRule& fc_rule() {
  static const FcRule r;
  return r;
}

}  // namespace fresco::layers
