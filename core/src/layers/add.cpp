// add: the join of a residual block, y = main(x) + shortcut(x). It has two inputs, so the Compiler emits its
// node itself (forward: one `add`; backward: none, the output gradient flows unchanged into both branches,
// and where a tensor has two consumers their gradients are summed with `add`). Tested by the golden case
// resnet_sgd.
#include "fresco/core/error.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class AddRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  void forward(EmitContext&, const LayerDescriptor& l, TensorId, TensorId, bool) const override {
    throw Error(ErrorCode::kInternal, l.name + ": the compiler emits residual joins itself");
  }
  void backward(EmitContext&, const LayerDescriptor& l, TensorId, TensorId, TensorId,
                TensorId) const override {
    throw Error(ErrorCode::kInternal, l.name + ": residual joins have no backward node");
  }
};

const LayerRule& add_rule() {
  static const AddRule r;
  return r;
}

}  // namespace fresco::layers
