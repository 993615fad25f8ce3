// flatten: to [N,1,1,H*W*C] in PyTorch's C,H,W feature order. NHWC maps with one channel or a 1x1 size have
// that order already (a view: no node, no tensor); other maps get flatten_chw, a permuting copy (and its
// inverse in backward). Tested by test_graph_atlas.cpp and the golden case cnn_adam_cifar.
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class FlattenRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override {
    return Shape{1, 1, 1, in.per_sample()};
  }
  bool view(const LayerDescriptor& l, bool) const override {
    return l.in_sample.c == 1 || l.in_sample.h * l.in_sample.w == 1;
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(FR_OP_FLATTEN_CHW, l.name, {x}, {y});
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId, TensorId, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n = compute_node(FR_OP_FLATTEN_CHW_BACKWARD, l.name, {dy}, {dx});
    cx.add(std::move(n));
  }
};

const LayerRule& flatten_rule() {
  static const FlattenRule r;
  return r;
}

}  // namespace fresco::layers
