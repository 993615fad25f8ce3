// relu: y = max(x, 0); backward dx = dy where y > 0 (uses the output, so relu may run in place of a copy).
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class ReluRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n;
    n.op = FR_OP_RELU;
    n.label = l.name;
    n.in = {x};
    n.out = {y};
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId, TensorId y, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n;
    n.op = FR_OP_RELU_BACKWARD;
    n.label = l.name;
    n.in = {dy, y};
    n.out = {dx};
    cx.add(std::move(n));
  }
};

const LayerRule& relu_rule() {
  static const ReluRule r;
  return r;
}

}  // namespace fresco::layers
