// Compiler stage 4's nodes per layer: the input transfer and normalisation, each layer's training forward
// and backward (fused joins, the fused head, forked shortcuts, the masking passes that write gradient sums),
// the loss, and the inference forward. Used by Compiler::build_computation_graph and by the memory plan's
// lifetime fitting, which emits the same nodes on the feature timeline. Tests: tests/core/test_compiler*.cpp,
// test_graph_atlas.cpp.
#include <algorithm>

#include "compiler/compile_internal.h"
#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco::compile_detail {

using layers::batchnorm_add_node;
using layers::batchnorm_statistics_node;
using layers::compute_node;
using layers::EmitContext;
using layers::fc_weight_gradient_node;
using layers::rule_for;

namespace {
// Layer i is the head that CompileOptions::fuse_head runs as one fc_softmax_xent node in training.
bool is_fused_head(const CompiledModel& m, int i) {
  return m.arch.fused_head && i + 1 == static_cast<int>(m.arch.layers.size());
}

// The map layer j writes (-1: the normalised network input).
TensorId output_of(const CompiledModel& m, int32_t j) {
  return j < 0 ? m.t.input_f32 : m.arch.layers[static_cast<size_t>(j)].out;
}

// The forward node of a two-input join: add / add_relu for a residual block, concat for a concat block.
GraphNode join_node(const LayerDescriptor& l, TensorId a, TensorId b) {
  if (l.kind == LayerKind::ADD) return add_node(a, b, l.out, l.name, l.fused_relu);
  GraphNode n = compute_node(FR_OP_CONCAT, l.name, {a, b}, {l.out});
  return n;
}

// CompileOptions::fork_shortcuts: the layers first..last of join j's second branch (a chain from the block's
// input, emitted after the main branch and right before the join) and the main branch's first layer, before
// which the branch forks onto the side stream; first = -1 when the join has no such branch (an identity
// shortcut) or the option is off.
struct ForkedBranch {
  int32_t main_first = -1, first = -1, last = -1;
};
ForkedBranch forked_branch(const CompiledModel& m, int32_t j) {
  const auto& layers = m.arch.layers;
  const auto& join = layers[static_cast<size_t>(j)];
  if (!m.options.fork_shortcuts || join.kind != LayerKind::ADD) return {};
  const int32_t main_end = std::min(join.input, join.input2), last = std::max(join.input, join.input2);
  if (main_end < 0 || last != j - 1 || last <= main_end) return {};
  auto of = [&](int32_t k) -> const LayerDescriptor& { return layers[static_cast<size_t>(k)]; };
  auto single = [&](int32_t k) { return of(k).kind != LayerKind::ADD && of(k).kind != LayerKind::CONCAT; };
  const int32_t first = main_end + 1, fork = of(first).input, fp = first_param_index(m.arch);
  if (fp >= first && fp <= last) return {};
  for (int32_t k = first; k <= last; ++k)
    if (!single(k) || of(k).input != (k == first ? fork : k - 1) || is_fused_head(m, k)) return {};
  int32_t main_first = main_end;  // the main branch back to the layer that reads the fork
  while (main_first > fork && single(main_first) && of(main_first).input != fork) {
    if (of(main_first).input >= main_first) return {};
    main_first = of(main_first).input;
  }
  if (main_first <= fork || !single(main_first) || of(main_first).input != fork) return {};
  return {main_first, first, last};
}

// Forward of layer i in training (views emit nothing; residual joins emit their add).
void emit_layer_forward(EmitContext& cx, const CompiledModel& m, int i) {
  const auto& l = m.arch.layers[static_cast<size_t>(i)];
  if (l.fused_into_join) return;    // a batchnorm the join below computes
  if (is_fused_head(m, i)) return;  // in fc_softmax_xent (emit_fused_head)
  if (l.kind == LayerKind::ADD && l.join_bn >= 0 && l.applied_by_conv) {
    // CompileOptions::join_prologue: the statistics only; the conv that reads the join writes its map
    cx.add(
        batchnorm_statistics_node(m.arch.layers[static_cast<size_t>(l.join_bn)], layer_input(m, l.join_bn)));
  } else if (l.kind == LayerKind::ADD && l.join_bn >= 0) {  // batchnorm_add: bn(x) + the other branch
    const auto& bn = m.arch.layers[static_cast<size_t>(l.join_bn)];
    const int32_t other = join_other_input(l);
    GraphNode& n =
        cx.add(batchnorm_add_node(bn, layer_input(m, l.join_bn), output_of(m, other), l.out, l.fused_relu));
    if (l.subsample_out != kNoTensor)
      n.out.push_back(l.subsample_out);  // CompileOptions::subsampled_shortcuts
  } else if (l.kind == LayerKind::ADD || l.kind == LayerKind::CONCAT) {
    cx.add(join_node(l, layer_input(m, i), output_of(m, l.input2)));
  } else if (!rule_for(l.kind).is_view(l, true)) {
    rule_for(l.kind).forward(cx, l, training_input(m, i), l.out, true);
  }
}

// CompileOptions::fuse_head: the head's forward, the loss and the head's input gradient (with the previous
// fc's relu mask) as one node at the head's backward, then its weight gradient (side stream when split).
void emit_fused_head(EmitContext& cx, const CompiledModel& m) {
  const int i = static_cast<int>(m.arch.layers.size()) - 1;
  const auto& l = m.arch.layers[static_cast<size_t>(i)];
  const TensorId x = layer_input(m, i);
  // only the fc feeding the head through its fused relu is masked here (grad_premasked is also set on
  // batchnorms whose masking pass is elsewhere: CompileOptions::grad_sums)
  const bool mask = m.arch.fused_head_masks_input;
  GraphNode n = compute_node(FR_OP_FC_SOFTMAX_XENT, l.name, {x, l.weight, m.t.labels},
                             {m.t.logits, m.t.grad_logits, l.grad_in});
  if (l.spec.bias) n.in.push_back(l.bias);
  if (m.options.precision == DType::F16) n.rin = {RangeRef::of(m.t.step_scalars, DType::U8)};
  n.rout = {RangeRef::of(m.t.batch_train, DType::U8)};
  cx.add(std::move(n))
      .with_params(FrFcSoftmaxXentParams{l.spec.bias ? 1 : 0, mask ? 1 : 0, m.options.loss.smoothing, 0});
  cx.add(fc_weight_gradient_node(l, x, m.t.grad_logits, m.options.overlap_weight_gradients));
}

}  // namespace

GraphNode range_node(const char* op, std::vector<RangeRef> rin, std::vector<RangeRef> rout,
                     const std::string& label) {
  GraphNode n;
  n.kind = NodeKind::RANGE;
  n.op = op;
  n.rin = std::move(rin);
  n.rout = std::move(rout);
  n.label = label;
  return n;
}

void emit_transfer(ComputationGraph& g, char ab) {
  const GraphId gid = ab == 'A' ? GraphId::TRANSFER_A : GraphId::TRANSFER_B;
  const Region first = ab == 'A' ? Region::I_A_LABELS : Region::I_B_LABELS;
  const Region last = ab == 'A' ? Region::I_A_DATA : Region::I_B_DATA;
  g.add(gid, range_node(FR_OP_COPY, {RangeRef::staging_buffer(ab)},
                        {RangeRef::regions(first, last, DType::U8)}, std::string("h2d input ") + ab));
}

void emit_input(EmitContext& cx, const CompiledModel& m, char ab) {
  const JobTensors& t = m.t;
  // normalises the pixels and copies the batch's labels to labels.current in one pass
  GraphNode n = compute_node(FR_OP_NORMALIZE_INPUT, "normalize",
                             {ab == 'A' ? t.data_a : t.data_b, ab == 'A' ? t.labels_a : t.labels_b},
                             {t.input_f32, t.labels});
  FrNormalizeParams np{};
  np.channels = static_cast<int32_t>(m.arch.input_sample.c);
  for (int c = 0; c < np.channels; ++c) {
    np.mean[c] = m.options.normalize.mean[static_cast<size_t>(c)];
    np.std[c] = m.options.normalize.std[static_cast<size_t>(c)];
  }
  cx.add(std::move(n)).with_params(np);
}

TensorId layer_input(const CompiledModel& m, int i) {
  return output_of(m, m.arch.layers[static_cast<size_t>(i)].input);
}

TensorId training_input(const CompiledModel& m, int i) {
  const auto& l = m.arch.layers[static_cast<size_t>(i)];
  return l.reads_subsample ? l.subsample_in : layer_input(m, i);
}

GraphNode add_node(TensorId a, TensorId b, TensorId y, const std::string& label, bool relu) {
  GraphNode n = compute_node(relu ? FR_OP_ADD_RELU : FR_OP_ADD, label, {a, b}, {y});
  return n;
}

// Forward of layer i in training. With CompileOptions::fork_shortcuts a join's forked branch is emitted on
// the side stream before its main branch's first layer (and not again at its own layers), and the join waits
// for it.
void emit_forward(EmitContext& cx, const CompiledModel& m, int i) {
  if (!m.options.fork_shortcuts) return emit_layer_forward(cx, m, i);
  const auto count = static_cast<int32_t>(m.arch.layers.size());
  for (int32_t j = i + 1; j < count; ++j) {
    const ForkedBranch b = forked_branch(m, j);
    if (b.first < 0) continue;
    if (i >= b.first && i <= b.last) return;  // emitted at the fork
    if (b.main_first != i) continue;
    const size_t before = cx.graph->nodes(cx.gid).size();
    for (int32_t k = b.first; k <= b.last; ++k) emit_layer_forward(cx, m, k);
    std::vector<GraphNode>& nodes = cx.graph->mutable_nodes(cx.gid);
    for (size_t n = before; n < nodes.size(); ++n) nodes[n].side_stream = true;
  }
  const size_t before = cx.graph->nodes(cx.gid).size();
  emit_layer_forward(cx, m, i);
  std::vector<GraphNode>& nodes = cx.graph->mutable_nodes(cx.gid);
  if (forked_branch(m, i).first >= 0 && nodes.size() > before) nodes[before].join_side = true;
}

// Backward of layer i: first the sum of its two output-gradient contributions, then its own node(s).
void emit_backward(EmitContext& cx, const CompiledModel& m, int i, TensorId dx) {
  const auto& l = m.arch.layers[static_cast<size_t>(i)];
  if (is_fused_head(m, i)) {
    emit_fused_head(cx, m);
    return;
  }
  // A masking pass that writes a batchnorm's output gradient also writes that batchnorm's gradient sums,
  // reading its input x (CompileOptions::grad_sums; ops.h).
  auto with_grad_sums = [&](GraphNode n) {
    for (const int32_t b : {l.grad_sums_bn, l.grad_sums_bn2})
      if (b >= 0) {
        const auto& bn = m.arch.layers[static_cast<size_t>(b)];
        n.in.insert(n.in.end(), {layer_input(m, bn.index), bn.save_mean});
        n.out.push_back(bn.grad_sums);
      }
    return n;
  };
  // add_relu_backward of the two parts, the second compact where a strided 1x1 conv wrote it so
  // (CompileOptions::compact_shortcut_grads; ops.h)
  auto add_relu_backward = [&](TensorId dx_out) {
    GraphNode& n = cx.add(with_grad_sums(
        compute_node(FR_OP_ADD_RELU_BACKWARD, l.name, {l.grad_sum_a, l.grad_sum_b, l.out}, {dx_out})));
    if (l.compact_part_stride > 0)
      n.with_params(FrAddReluBackwardParams{l.compact_part_stride, l.compact_part_stride});
  };
  if (l.join_grad_by_conv >= 0) return;  // the pass below is in that conv's input gradient (join_epilogue)
  if (l.kind == LayerKind::ADD && l.fused_relu && l.grad_sum_a != kNoTensor) {  // sum and mask in one pass
    add_relu_backward(l.grad_in);
    return;
  }
  if (l.kind == LayerKind::RELU && l.grad_sums_bn >= 0) {  // the relu fused into a batchnorm, read twice: the
    // two parts summed and masked by the batchnorm's output (its backward then gets the gradient premasked)
    add_relu_backward(l.grad_out);
    return;
  }
  FRESCO_CHECK(l.compact_part_stride == 0, ErrorCode::kInternal,
               l.name + ": a compact gradient part planned where add_relu_backward does not sum the parts");
  if (l.grad_sum_a != kNoTensor) cx.add(add_node(l.grad_sum_a, l.grad_sum_b, l.grad_out, "grad " + l.name));
  if (l.kind == LayerKind::ADD && l.fused_relu) {  // the fused relu's backward; both branches read the result
    cx.add(with_grad_sums(compute_node(FR_OP_RELU_BACKWARD, l.name, {l.grad_out, l.out}, {l.grad_in})));
    return;
  }
  if (l.kind == LayerKind::CONCAT) {  // the split: each branch gets its channels of the gradient
    GraphNode n = compute_node(FR_OP_CONCAT_BACKWARD, l.name, {l.grad_out}, {l.grad_in, l.grad_in2});
    cx.add(std::move(n));
    return;
  }
  if (l.kind == LayerKind::ADD || rule_for(l.kind).is_view(l, true)) return;
  rule_for(l.kind).backward(cx, l, training_input(m, i), l.out, l.grad_out, dx);
}

void emit_loss(EmitContext& cx, const CompiledModel& m, bool training) {
  if (training && m.arch.fused_head) return;  // in fc_softmax_xent (emit_fused_head)
  GraphNode n;
  n.op = FR_OP_SOFTMAX_XENT;
  n.label = "loss";
  n.in = {m.t.logits, m.t.labels};
  if (training) n.out = {m.t.grad_logits};
  // fp16: the gradient leaves the loss multiplied by the dynamic loss scale (S region)
  if (training && m.options.precision == DType::F16) n.rin = {RangeRef::of(m.t.step_scalars, DType::U8)};
  n.rout = {RangeRef::of(training ? m.t.batch_train : m.t.batch_val, DType::U8)};
  cx.add(std::move(n)).with_params(FrSoftmaxXentParams{m.options.loss.smoothing, training ? 1 : 0});
}

// Inference forward of layer l: views (dropout) alias their input; `value` maps layers to the tensor that
// holds their output in inference.
void emit_inference_forward(EmitContext& cx, const CompiledModel& m, const LayerDescriptor& l,
                            std::vector<TensorId>& value) {
  auto in_value = [&](int32_t j) { return j < 0 ? m.t.input_f32 : value[static_cast<size_t>(j)]; };
  if (l.kind == LayerKind::ADD || l.kind == LayerKind::CONCAT) {
    cx.add(join_node(l, in_value(l.input), in_value(l.input2)));
    value[static_cast<size_t>(l.index)] = l.out;
  } else if (rule_for(l.kind).is_view(l, false)) {
    value[static_cast<size_t>(l.index)] = in_value(l.input);  // output aliases input in inference
  } else {
    rule_for(l.kind).forward(cx, l, in_value(l.input), l.out, false);
    value[static_cast<size_t>(l.index)] = l.out;
  }
}

}  // namespace fresco::compile_detail
