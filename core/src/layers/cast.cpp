// cast: inserted by the compiler (never written in a BluePrint) where mixed precision changes a map's dtype,
// e.g. between the last low-precision layer and an fp32 fc: y = x converted, and in backward the gradient
// converted back (ops.h FR_OP_CAST). Tested by tests/core/test_mixed_precision_plan.cpp.
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

namespace {
void emit_cast(EmitContext& cx, const LayerDescriptor& l, TensorId from, TensorId to) {
  GraphNode n = compute_node(FR_OP_CAST, l.name, {from}, {to});
  cx.add(std::move(n));
}
}  // namespace

class CastRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    emit_cast(cx, l, x, y);
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId, TensorId, TensorId dy,
                TensorId dx) const override {
    if (dx != kNoTensor) emit_cast(cx, l, dy, dx);
  }
};

const LayerRule& cast_rule() {
  static const CastRule r;
  return r;
}

}  // namespace fresco::layers
