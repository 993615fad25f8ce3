// dropout: inverted dropout with a Philox mask that is a pure function of (seed, layer, step, index), so
// backward regenerates it and nothing is stored; in inference it is a view (identity).
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class DropoutRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    FRESCO_CHECK(
        l.spec.p >= 0.0f && l.spec.p < 1.0f, ErrorCode::kBadConfig,
        "layer " + l.spec.path + " (dropout): p must be in [0, 1), found " + std::to_string(l.spec.p));
    return in;
  }
  bool view(const LayerDescriptor&, bool training) const override { return !training; }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(FR_OP_DROPOUT, l.name, {x}, {y});
    n.rin = {RangeRef::of(cx.job->step_scalars, DType::U8)};
    cx.add(std::move(n)).with_params(FrDropoutParams{l.spec.p, static_cast<uint32_t>(l.index)});
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId, TensorId, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n = compute_node(FR_OP_DROPOUT_BACKWARD, l.name, {dy}, {dx});
    n.rin = {RangeRef::of(cx.job->step_scalars, DType::U8)};
    cx.add(std::move(n)).with_params(FrDropoutParams{l.spec.p, static_cast<uint32_t>(l.index)});
  }
};

const LayerRule& dropout_rule() {
  static const DropoutRule r;
  return r;
}

}  // namespace fresco::layers
