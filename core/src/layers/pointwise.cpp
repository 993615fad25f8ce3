// Element-wise activations, shape-preserving, one forward and one backward node each: relu (backward
// dx = dy where y > 0, from the output, so relu may run in place), gelu (exact erf form, backward from x),
// silu (from x), sigmoid and tanh (from the output y, as in PyTorch). Tested by
// tests/core/test_compiler_activations.cpp, the golden cases and the kernels' tests.
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

class PointwiseRule final : public LayerRule {
 public:
  PointwiseRule(const char* fwd, const char* bwd, bool backward_reads_output)
      : fwd_(fwd), bwd_(bwd), reads_y_(backward_reads_output) {}
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(fwd_, l.name, {x}, {y});
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    GraphNode n = compute_node(bwd_, l.name, {dy, reads_y_ ? y : x}, {dx});
    cx.add(std::move(n));
  }

 private:
  const char* fwd_;
  const char* bwd_;
  bool reads_y_;
};

const LayerRule& relu_rule() {
  static const PointwiseRule r(FR_OP_RELU, FR_OP_RELU_BACKWARD, true);
  return r;
}
const LayerRule& gelu_rule() {
  static const PointwiseRule r(FR_OP_GELU, FR_OP_GELU_BACKWARD, false);
  return r;
}
const LayerRule& silu_rule() {
  static const PointwiseRule r(FR_OP_SILU, FR_OP_SILU_BACKWARD, false);
  return r;
}
const LayerRule& sigmoid_rule() {
  static const PointwiseRule r(FR_OP_SIGMOID, FR_OP_SIGMOID_BACKWARD, true);
  return r;
}
const LayerRule& tanh_rule() {
  static const PointwiseRule r(FR_OP_TANH, FR_OP_TANH_BACKWARD, true);
  return r;
}

}  // namespace fresco::layers
