// gelu: exact form y = x * Phi(x); backward reads dy and x. Tested by the golden case cnn_adam_cifar.
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class GeluRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n;
    n.op = FR_OP_GELU;
    n.label = l.name;
    n.in = {x};
    n.out = {y};
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n;
    n.op = FR_OP_GELU_BACKWARD;
    n.label = l.name;
    n.in = {dy, x};
    n.out = {dx};
    cx.add(std::move(n));
  }
};

const LayerRule& gelu_rule() {
  static const GeluRule r;
  return r;
}

}  // namespace fresco::layers
