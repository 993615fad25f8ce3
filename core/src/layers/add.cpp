// add (and concat): the two-input joins of residual and concat blocks, y = main(x) + shortcut(x) or their
// channels side by side. Having two inputs, their nodes are emitted by the Compiler itself (add: forward
// `add` or `add_relu`, no backward node beyond the fused relu's, the output gradient flows into both
// branches; concat: forward `concat`, backward `concat_backward`, the split). The output shape here is the
// first input's; the Compiler adds the second branch's channels for concat. Tested by the golden case
// resnet_sgd and tests/core/test_compiler_residual.cpp.
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
    throw Error(ErrorCode::kInternal, l.name + ": the compiler emits joins itself");
  }
};

const LayerRule& add_rule() {
  static const AddRule r;
  return r;
}

}  // namespace fresco::layers
