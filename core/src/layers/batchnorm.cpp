// bn: PyTorch BatchNorm2d over the channels of an NHWC map. gamma in W_BN_WEIGHT, beta in W_BN_BIAS (no-decay
// kinds), running mean/var in B_BN_STATS (moved by the training kernel), the batch statistics saved for
// backward in T. Inference uses the folded form: UPDATE_BN_INF_PARAMS folds gamma, beta and the running
// statistics into a per-channel scale and shift (B_BN_STATS) once before an evaluation pass, and the
// inference forward is one channel_affine. A following relu may be fused (fused_relu). A batchnorm that only
// a residual join reads is computed in training by the join (batchnorm_add_node; CompileOptions::fuse_joins).
// Reading a conv that writes the sums of its output, the training forward takes its statistics from them
// (CompileOptions::conv_stats). Its backward may take its gradient sums from the pass that wrote its output
// gradient (CompileOptions::grad_sums). Applied by the conv that reads it (CompileOptions::conv_prologue),
// the training forward computes only the statistics; that conv writes its output. Read only from the first
// conv, its backward may leave dx to that conv's weight gradient (dx_by_conv; ops.h).
// Tested by the golden cases cnn_adam_cifar and resnet_sgd.
#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

namespace {
// The training forward of batchnorm l over `in` ({x, gamma, beta} or, batchnorm_add, also the residual).
// y = kNoTensor: the statistics-only form (ops.h), the conv that reads the batchnorm applies it.
GraphNode training_node(const char* op, const LayerDescriptor& l, std::vector<TensorId> in, TensorId y,
                        bool relu) {
  if (l.sums != kNoTensor) in.push_back(l.sums);  // statistics from the conv that wrote x (ops.h)
  std::vector<TensorId> out = {y, l.save_mean, l.save_invstd};
  if (y == kNoTensor) out.erase(out.begin());
  GraphNode n = compute_node(op, l.name, std::move(in), std::move(out));
  n.rout = {RangeRef::of(l.running_mean, DType::F32), RangeRef::of(l.running_var, DType::F32)};
  n.with_params(FrBatchNormParams{l.spec.eps, l.spec.momentum, 1, relu ? 1 : 0});
  return n;
}
}  // namespace

GraphNode batchnorm_add_node(const LayerDescriptor& bn, TensorId x, TensorId residual, TensorId y,
                             bool relu) {
  return training_node(FR_OP_BATCHNORM_ADD, bn, {x, bn.weight, bn.bias, residual}, y, relu);
}

GraphNode batchnorm_statistics_node(const LayerDescriptor& bn, TensorId x) {
  return training_node(FR_OP_BATCHNORM, bn, {x, bn.weight, bn.bias}, kNoTensor, false);
}

class BatchNormRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor&, const Shape& in) const override { return in; }
  bool has_params() const override { return true; }
  void alloc_params(LayerDescriptor& l, MemoryPlan& plan) const override {
    FRESCO_CHECK(
        !l.first_param_layer, ErrorCode::kBadConfig,
        "layer " + l.spec.path + " (bn): a batchnorm as the first trainable layer is not supported yet");
    const Shape c{1, 1, 1, l.in_sample.c};
    l.weight = plan.alloc_param(ParamKind::BN_WEIGHT, c, l.name + ".weight", l.index);
    l.bias = plan.alloc_param(ParamKind::BN_BIAS, c, l.name + ".bias", l.index);
    l.running_mean = plan.alloc(Region::B_BN_STATS, DType::F32, c, l.name + ".running_mean", l.index);
    l.running_var = plan.alloc(Region::B_BN_STATS, DType::F32, c, l.name + ".running_var", l.index);
    l.bn_scale = plan.alloc(Region::B_BN_STATS, DType::F32, c, l.name + ".inference_scale", l.index);
    l.bn_shift = plan.alloc(Region::B_BN_STATS, DType::F32, c, l.name + ".inference_shift", l.index);
    l.save_mean = plan.alloc_temp(DType::F32, c, l.name + ".save_mean");
    l.save_invstd = plan.alloc_temp(DType::F32, c, l.name + ".save_invstd");
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y,
               bool training) const override {
    if (!training) {  // the folded form (inference_prepare wrote scale and shift)
      cx.add(compute_node(FR_OP_CHANNEL_AFFINE, l.name, {x, l.bn_scale, l.bn_shift}, {y}))
          .with_params(FrChannelAffineParams{l.fused_relu ? 1 : 0, 0});
      return;
    }
    cx.add(training_node(FR_OP_BATCHNORM, l, {x, l.weight, l.bias}, l.applied_by_conv ? kNoTensor : y,
                         l.fused_relu));
  }
  void inference_prepare(EmitContext& cx, const LayerDescriptor& l) const override {
    cx.add(compute_node(FR_OP_BATCHNORM_FOLD, l.name, {l.weight, l.bias, l.running_mean, l.running_var},
                        {l.bn_scale, l.bn_shift}))
        .with_params(FrBatchNormParams{l.spec.eps, l.spec.momentum, 0, 0});
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    FRESCO_CHECK((dx != kNoTensor) != l.dx_by_conv, ErrorCode::kInternal,
                 l.name + ": batchnorm backward needs an input gradient, unless the conv before applies it");
    FRESCO_CHECK(!l.dx_by_conv || (l.grad_premasked && l.grad_sums != kNoTensor), ErrorCode::kInternal,
                 l.name + ": the weights-only backward needs a premasked gradient with its sums");
    // the weights-only form: the first conv's weight gradient applies dx (ops.h)
    std::vector<TensorId> out = {dx, l.grad_weight, l.grad_bias};
    if (l.dx_by_conv) out.erase(out.begin());
    GraphNode n = compute_node(FR_OP_BATCHNORM_BACKWARD, l.name,
                               {dy, x, l.weight, l.save_mean, l.save_invstd}, std::move(out));
    // dy is w.r.t. the relu output; the kernel masks it with y > 0, which a backend may recompute from x and
    // beta (ops.h), unless the pass that wrote dy masked it already (grad_premasked). The gradient sums come
    // from that pass when it wrote them (CompileOptions::grad_sums).
    const bool mask = l.fused_relu && !l.grad_premasked;
    if (mask) n.in.insert(n.in.end(), {y, l.bias});
    FRESCO_CHECK(!(mask && l.grad_sums != kNoTensor), ErrorCode::kInternal,
                 l.name + ": gradient sums are for a premasked batchnorm gradient only");
    if (l.grad_sums != kNoTensor) n.in.push_back(l.grad_sums);
    cx.add(std::move(n)).with_params(FrBatchNormParams{l.spec.eps, l.spec.momentum, 1, mask ? 1 : 0});
  }
};

const LayerRule& batchnorm_rule() {
  static const BatchNormRule r;
  return r;
}

}  // namespace fresco::layers
