// flatten: a view. NHWC maps with one channel or 1x1 spatial size flatten to the same bytes as PyTorch's
// C,H,W order; other maps need a permuting copy, which arrives with convolutions (rejected with a clear error
// until then).
#include "fresco/core/error.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class FlattenRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    FRESCO_CHECK(
        in.c == 1 || in.h * in.w == 1, ErrorCode::kBadConfig,
        "layer " + l.spec.path + " (flatten): flattening a " + in.str() +
            " map in PyTorch's C,H,W order needs a permuting flatten, not supported yet (maps with one "
            "channel or 1x1 size only)");
    return Shape{1, 1, 1, in.per_sample()};
  }
  bool view(bool) const override { return true; }
  void forward(EmitContext&, const LayerDescriptor&, TensorId, TensorId, bool) const override {}
  void backward(EmitContext&, const LayerDescriptor&, TensorId, TensorId, TensorId, TensorId) const override {
  }
};

const LayerRule& flatten_rule() {
  static const FlattenRule r;
  return r;
}

}  // namespace fresco::layers
