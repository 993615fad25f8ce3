// maxpool, avgpool (window k, stride default k, padding; avg counts padding, PyTorch's default) and gap
// (global average over H and W). Max backward reads x and y to find the winner; average backward needs only
// dy. Tested by the golden cases.
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

namespace {
FrPoolParams params_of(const LayerDescriptor& l) {
  FrPoolParams p{};
  p.kh = p.kw = static_cast<int32_t>(l.spec.k);
  p.stride_h = p.stride_w = static_cast<int32_t>(l.spec.stride > 0 ? l.spec.stride : l.spec.k);
  p.pad_h = p.pad_w = static_cast<int32_t>(l.spec.pad);
  return p;
}

class PoolRule final : public LayerRule {
 public:
  PoolRule(const char* fwd, const char* bwd, bool max, bool global)
      : fwd_(fwd), bwd_(bwd), max_(max), global_(global) {}
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    if (global_) return Shape{1, 1, 1, in.c};
    const FrPoolParams p = params_of(l);
    FRESCO_CHECK(p.kh > 0 && in.h + 2 * p.pad_h >= p.kh && in.w + 2 * p.pad_w >= p.kw && 2 * p.pad_h <= p.kh,
                 ErrorCode::kBadConfig,
                 "layer " + l.spec.path + " (" + l.spec.kind + "): a " + std::to_string(p.kh) + "x" +
                     std::to_string(p.kw) + " window (padding " + std::to_string(p.pad_h) +
                     ") does not fit " + in.str());
    return Shape{1, (in.h + 2 * p.pad_h - p.kh) / p.stride_h + 1,
                 (in.w + 2 * p.pad_w - p.kw) / p.stride_w + 1, in.c};
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(fwd_, l.name, {x}, {y});
    if (!global_) n.with_params(params_of(l));
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n =
        compute_node(bwd_, l.name, max_ ? std::vector<TensorId>{dy, x, y} : std::vector<TensorId>{dy}, {dx});
    if (!global_) n.with_params(params_of(l));
    cx.add(std::move(n));
  }

 private:
  const char *fwd_, *bwd_;
  bool max_, global_;
};
}  // namespace

const LayerRule& maxpool_rule() {
  static const PoolRule r(FR_OP_MAX_POOL2D, FR_OP_MAX_POOL2D_BACKWARD, true, false);
  return r;
}
const LayerRule& avgpool_rule() {
  static const PoolRule r(FR_OP_AVG_POOL2D, FR_OP_AVG_POOL2D_BACKWARD, false, false);
  return r;
}
const LayerRule& gap_rule() {
  static const PoolRule r(FR_OP_GLOBAL_AVG_POOL, FR_OP_GLOBAL_AVG_POOL_BACKWARD, false, true);
  return r;
}

}  // namespace fresco::layers
