// Compiler stage 3 (Compiler::create_memory_plans): every tensor of the job at a fixed offset in its
// region (parameters, their shadows and compute copies, inputs, feature maps and gradients, step scalars,
// results), the feature maps' lifetimes fitted to the nodes that touch them, and one plan per present
// variant. Tests: tests/core/test_memory_plan*.cpp, test_compiler*.cpp.
#include <algorithm>
#include <functional>

#include "compiler/compile_internal.h"
#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco {

using compile_detail::add_node;
using compile_detail::emit_backward;
using compile_detail::emit_forward;
using compile_detail::emit_inference_forward;
using compile_detail::emit_input;
using compile_detail::emit_loss;
using compile_detail::first_param_index;
using compile_detail::fused_join_relu;
using compile_detail::layer_input;
using layers::EmitContext;
using layers::rule_for;

namespace {
// True when a layer's input gradient is its output gradient itself (views, plain residual joins); a join with
// a fused relu writes a masked gradient of its own.
bool passes_gradient(const LayerDescriptor& l) {
  return (l.kind == LayerKind::ADD && !l.fused_relu) || rule_for(l.kind).is_view(l, true);
}

// The sample shape of the tensor layer l reads: through a flatten view (one channel or a 1x1 map) that is the
// map before it, so l's input gradient has the shape the backward of the layer before the view expects.
Shape read_sample(const ArchPlan& a, const LayerDescriptor& l) {
  int32_t i = l.input;
  while (i >= 0 && a.layers[static_cast<size_t>(i)].kind == LayerKind::FLATTEN &&
         rule_for(LayerKind::FLATTEN).is_view(a.layers[static_cast<size_t>(i)], true))
    i = a.layers[static_cast<size_t>(i)].input;
  if (i == l.input) return l.in_sample;
  return i < 0 ? a.input_sample : a.layers[static_cast<size_t>(i)].out_sample;
}

// A compact input gradient's sample shape (CompileOptions::compact_shortcut_grads; ops.h): the conv's
// output positions, its input's channels.
Shape compact_sample(const LayerDescriptor& l) {
  return Shape{1, l.out_sample.h, l.out_sample.w, l.in_sample.c};
}

// Whether `part`, a gradient part of layer i's output, is a reader's compact input gradient.
bool compact_part(const ArchPlan& a, int i, TensorId part) {
  for (const auto& l : a.layers)
    if (l.input == i && l.compact_dx && l.grad_in == part) return true;
  return false;
}
}  // namespace

static void fit_feature_lifetimes(CompiledModel& m, MemoryPlan& p);

// Every tensor of m's job at the largest batch (m.options.val_batch, compute_max_slot_bytes) and the
// per-sample sizes of m.arch, finalized; assigns the arch's and m.t's tensor handles.
static MemoryPlan plan_tensors(CompiledModel& m) {
  const int64_t mb = m.options.val_batch;
  MemoryPlan p;
  ArchPlan& a = m.arch;
  const int L = static_cast<int>(a.layers.size());
  const int end = 2 * L + 3;
  JobTensors& t = m.t;
  auto batched = [&](TensorId id) {
    p.mutable_tensor(id).batched = true;
    return id;
  };
  // Parameters in layer order (lock-step order inside each kind), then their shadows.
  for (auto& l : a.layers) rule_for(l.kind).alloc_params(l, p);
  for (auto& l : a.layers)  // a conv's sums for the batchnorm that reads it (CompileOptions::conv_stats)
    if (l.writes_sums)
      l.sums = p.alloc_temp(DType::F32, Shape{1, 1, 1, 2 * l.out_sample.c}, l.name + ".sums");
  for (auto& l : a.layers)
    if (l.reads_sums) l.sums = a.layers[static_cast<size_t>(l.input)].sums;
  for (auto& l : a.layers)  // a batchnorm's gradient sums, written by a masking pass (grad_sums)
    for (const int32_t b : {l.grad_sums_bn, l.grad_sums_bn2})
      if (b >= 0) {
        auto& bn = a.layers[static_cast<size_t>(b)];
        bn.grad_sums = p.alloc_temp(DType::F32, Shape{1, 1, 1, 2 * bn.out_sample.c}, bn.name + ".grad_sums");
        if (l.kind == LayerKind::CONV) l.grad_sums = bn.grad_sums;  // the conv writes them
      }
  const Optimizer& opt = m.options.optimizer;
  for (Family f : {Family::G, Family::M, Family::V, Family::E}) {
    if (f == Family::M && !opt.uses_m()) continue;
    if (f == Family::V && !opt.uses_v()) continue;
    if (f == Family::E && m.options.ema_decay <= 0.0f)
      continue;  // the weights' average (CompileOptions::ema)
    for (auto& l : a.layers) {
      for (TensorId w : {l.weight, l.bias}) {
        if (w == kNoTensor) continue;
        // the updates read the conv weights' G16 (CompiledModel::updates_read_grads16): no f32 copy
        if (f == Family::G && l.kind == LayerKind::CONV && w == l.weight && m.updates_read_grads16())
          continue;
        TensorId s = p.alloc_shadow(f, w);
        if (f == Family::G) (w == l.weight ? l.grad_weight : l.grad_bias) = s;
      }
    }
  }
  // Mixed precision: every conv weight gets a low-precision compute copy (A) and gradient (G16), in W order.
  if (m.options.precision != DType::F32)
    for (auto& l : a.layers)
      if (l.kind == LayerKind::CONV) {
        l.compute_weight = p.alloc_shadow(Family::A, l.weight, m.options.precision);
        l.grad_weight_low = p.alloc_shadow(Family::G16, l.weight, m.options.precision);
      }
  const Shape in_batch = a.input_sample.with_batch(mb);
  t.labels_a = batched(p.alloc_input_labels('A', mb));
  t.data_a = batched(p.alloc_input_data('A', in_batch));
  t.labels_b = batched(p.alloc_input_labels('B', mb));
  t.data_b = batched(p.alloc_input_data('B', in_batch));
  // Feature timeline: 0 normalise, i+1 forward of layer i, L+1 loss, 2L+1-i backward of layer i. Activations
  // live until their producer's backward (every consumer comes later in forward and earlier in backward);
  // gradients live from the backward that writes them to the end of backward (a side stream may still read
  // them).
  t.input_f32 = batched(p.alloc_feature(in_batch, "input.normalized", -1, 0, end, a.input_dtype));
  auto dtype_of = [&](int32_t j) {
    return j < 0 ? a.input_dtype : a.layers[static_cast<size_t>(j)].out_dtype;
  };
  auto input_tensor = [&](int32_t j) { return j < 0 ? t.input_f32 : a.layers[static_cast<size_t>(j)].out; };
  for (auto& l : a.layers) {
    if (rule_for(l.kind).is_view(l, true)) {
      l.out = input_tensor(l.input);
      DTensor& d = p.mutable_tensor(l.out);
      d.live_end = std::max(d.live_end, 2 * L + 1 - l.index);
    } else {
      l.out = batched(p.alloc_feature(l.out_sample.with_batch(mb), l.name + ".out", l.index, l.index + 1,
                                      2 * L + 1 - l.index, l.out_dtype));
    }
  }
  for (auto& l : a.layers) {  // a join's subsampled output and the shortcut reading it (subsampled_shortcuts)
    if (!l.reads_subsample) continue;
    auto& join = a.layers[static_cast<size_t>(a.layers[static_cast<size_t>(l.input)].input)];
    FRESCO_CHECK(join.writes_subsample && join.subsample_out == kNoTensor, ErrorCode::kInternal,
                 l.name + ": the subsampled map's join was not planned");
    const Shape half{1, (join.out_sample.h + 1) / 2, (join.out_sample.w + 1) / 2, join.out_sample.c};
    join.subsample_out =
        batched(p.alloc_feature(half.with_batch(mb), join.name + ".out (even rows and columns)", join.index,
                                join.index + 1, 2 * L + 1 - l.index, join.out_dtype));
    l.subsample_in = join.subsample_out;
  }
  for (auto& l : a.layers)  // the batchnorm a conv applies and its input map (CompileOptions::conv_prologue)
    if (l.prologue_bn >= 0) {
      const auto& bn = a.layers[static_cast<size_t>(l.prologue_bn)];
      l.prologue = {bn.weight, bn.bias, bn.save_mean, bn.save_invstd};
      l.prologue_input = input_tensor(bn.input);
      if (l.prologue_join >= 0) {  // CompileOptions::join_prologue: the join's other branch
        const auto& join = a.layers[static_cast<size_t>(l.prologue_join)];
        l.prologue_residual = input_tensor(compile_detail::join_other_input(join));
      }
    }
  for (auto& l : a.layers)  // the batchnorm whose backward the first conv's weight gradient applies
    if (l.wgrad_prologue_bn >= 0) {
      const auto& bn = a.layers[static_cast<size_t>(l.wgrad_prologue_bn)];
      l.wgrad_prologue = {bn.weight, bn.save_mean, bn.save_invstd, bn.grad_sums};
    }
  t.logits = a.layers.back().out;
  const int fp = first_param_index(a);
  t.grad_logits = batched(p.alloc_feature(a.layers.back().out_sample.with_batch(mb), "grad(logits)", L - 1,
                                          L + 1, end, a.layers.back().out_dtype));
  // Gradients in reverse topological order: a layer's output gradient is its consumers' contributions (a view
  // or a residual join passes its own output gradient through; other layers give the gradient they write for
  // their input), summed when there are two.
  // (consumer, which input: 0 first, 1 second)
  std::vector<std::vector<std::pair<int32_t, int>>> consumers(static_cast<size_t>(L));
  for (const auto& l : a.layers) {
    if (l.input >= 0) consumers[static_cast<size_t>(l.input)].push_back({l.index, 0});
    if (l.input2 >= 0) consumers[static_cast<size_t>(l.input2)].push_back({l.index, 1});
  }
  for (int i = L - 1; i >= fp; --i) {
    auto& l = a.layers[static_cast<size_t>(i)];
    // A fused add+relu join whose relu's output two layers read already holds both parts, handed over by that
    // relu view (below): add_relu_backward sums and masks them, so the join stores no output gradient.
    const bool parts_handed_over = l.kind == LayerKind::ADD && l.grad_sum_a != kNoTensor;
    if (!parts_handed_over) {
      std::vector<TensorId> parts;
      if (i == L - 1) parts.push_back(t.grad_logits);
      for (const auto& [c, which] : consumers[static_cast<size_t>(i)]) {
        const auto& cl = a.layers[static_cast<size_t>(c)];
        // a fused-relu residual join gives both branches its one masked gradient; a concat splits
        parts.push_back(passes_gradient(cl) || cl.dx_by_conv         ? cl.grad_out
                        : cl.kind == LayerKind::CONCAT && which == 1 ? cl.grad_in2
                                                                     : cl.grad_in);
      }
      FRESCO_CHECK(!parts.empty() && parts.size() <= 2, ErrorCode::kBadConfig,
                   "layer " + l.spec.path + ": its output is read by " + std::to_string(parts.size()) +
                       " layers; one or two are supported");
      for (TensorId part : parts)
        FRESCO_CHECK(part != kNoTensor, ErrorCode::kInternal,
                     "layer " + l.spec.path + ": a gradient was not planned");
      // a compact part (CompileOptions::compact_shortcut_grads) is add_relu_backward's second
      if (parts.size() == 2 && compact_part(a, i, parts[0])) std::swap(parts[0], parts[1]);
      if (parts.size() == 1) {
        l.grad_out = parts[0];
      } else if (fused_join_relu(a, l)) {  // hand both parts to the join below
        auto& join = a.layers[static_cast<size_t>(l.input)];
        join.grad_sum_a = parts[0];
        join.grad_sum_b = parts[1];
        continue;  // a view: no gradient of its own
      } else {
        l.grad_sum_a = parts[0];
        l.grad_sum_b = parts[1];
        l.grad_out = l.join_grad_by_conv >= 0  // written by that conv's input gradient (join_epilogue)
                         ? a.layers[static_cast<size_t>(l.join_grad_by_conv)].grad_in
                         : batched(p.alloc_feature(l.out_sample.with_batch(mb), "grad(" + l.name + ".out)",
                                                   l.index, 2 * L + 1 - l.index, end, l.out_dtype));
      }
    }
    if (i == fp) break;  // the first trainable layer's input gradient is not needed
    if (l.join_grad_by_conv >= 0 && l.kind == LayerKind::ADD)  // a fused join's: the conv writes it
      l.grad_in = a.layers[static_cast<size_t>(l.join_grad_by_conv)].grad_in;
    else if (!passes_gradient(l) && !l.dx_by_conv && (l.input >= fp || l.kind == LayerKind::CONCAT))
      l.grad_in = batched(
          p.alloc_feature((l.compact_dx ? compact_sample(l) : read_sample(a, l)).with_batch(mb),
                          "grad(" + l.name + ".in)", l.index, 2 * L + 1 - l.index, end, dtype_of(l.input)));
    if (l.kind == LayerKind::CONCAT) {  // the split writes both parts
      const Shape in2 = l.input2 < 0 ? a.input_sample : a.layers[static_cast<size_t>(l.input2)].out_sample;
      l.grad_in2 = batched(p.alloc_feature(in2.with_batch(mb), "grad(" + l.name + ".in2)", l.index,
                                           2 * L + 1 - l.index, end, dtype_of(l.input2)));
    }
  }
  // CompileOptions::join_epilogue: each conv's operands, now that the gradients are planned
  for (auto& conv : a.layers) {
    if (conv.join_epilogue_of < 0) continue;
    const auto& mask = a.layers[static_cast<size_t>(conv.join_epilogue_of)];
    const auto& bn = a.layers[static_cast<size_t>(mask.grad_sums_bn)];
    FRESCO_CHECK(
        conv.grad_in != kNoTensor && (mask.grad_sum_a == conv.grad_in || mask.grad_sum_b == conv.grad_in),
        ErrorCode::kInternal, conv.name + ": the join epilogue's gradient parts were not planned");
    conv.join_epilogue = {mask.grad_sum_a == conv.grad_in ? mask.grad_sum_b : mask.grad_sum_a,
                          bn.input < 0 ? t.input_f32 : a.layers[static_cast<size_t>(bn.input)].out,
                          bn.save_mean};
    conv.grad_sums = bn.grad_sums;
  }
  t.labels = batched(p.alloc_temp(DType::I32, Shape{mb, 1, 1, 1}, "labels.current"));
  t.step_scalars = p.alloc_step_scalars();
  if (m.update_deferred()) t.update_scalars = p.alloc_step_scalars("update_scalars");
  const auto& sched = m.options.scheduler;
  t.lr_table =
      p.alloc_lr_table(sched.type == Scheduler::Type::TABLE ? static_cast<int64_t>(sched.table.size()) : 1);
  if (!sched.momenta.empty())
    t.momentum_table = p.alloc_lr_table(static_cast<int64_t>(sched.momenta.size()), "momentum_table");
  t.batch_train = p.alloc_result(sizeof(FrBatchResults), "batch_results.train");
  t.batch_val = p.alloc_result(sizeof(FrBatchResults), "batch_results.val");
  t.acc_train = p.alloc_result(sizeof(FrMetricAccumulators), "metrics.train");
  t.acc_val = p.alloc_result(sizeof(FrMetricAccumulators), "metrics.val");
  fit_feature_lifetimes(m, p);
  // CompileOptions::speculative_update: f32 bytes kept as 16-bit pairs, live from the backward time of the
  // layer its part waits for (CompiledModel::speculative_layer; the update at the end of DEEP_FWD_BWD: after
  // the last deep layer's backward) to the end of the step
  for (auto& b : m.speculative_backups) {
    const int32_t c = m.speculative_layer;
    const int32_t begin = b.layer < 0 ? 2 * L - fp : 2 * L + 1 - (c < 0 ? b.layer : std::min(b.layer, c));
    b.tensor = p.alloc_feature(Shape{1, 1, 1, static_cast<int64_t>(b.bytes / 2)},
                               "backup of the early update's bytes at " + std::to_string(b.at), -1, begin,
                               end, DType::F16);
  }
  p.finalize();
  return p;
}

namespace {
// The tensors of the same job at another input size (progressive resolution): the same tensors in the same
// order, the batched ones smaller, the others (parameters, their shadows, statistics, step scalars) the
// same; only the shapes are read from it.
MemoryPlan plan_at(const CompiledModel& m, const ArchPlan& fresh, const Shape& sample, const MemoryPlan& p) {
  CompiledModel sm;
  sm.options = m.options;
  sm.speculative_backups = m.speculative_backups;
  sm.speculative_layer = m.speculative_layer;
  sm.arch = Compiler::arch_at(fresh, sample);
  sm.batch_of = m.batch_of;
  MemoryPlan sp = plan_tensors(sm);
  FRESCO_CHECK(sp.size() == p.size(), ErrorCode::kInternal,
               "progressive resolution: the plan at " + sample.str() + " has " + std::to_string(sp.size()) +
                   " tensors, at " + m.arch.input_sample.str() + " " + std::to_string(p.size()));
  for (const DTensor& d : p.tensors()) {
    const DTensor& e = sp.tensor(d.id);
    FRESCO_CHECK(e.name == d.name && e.dtype == d.dtype && e.batched == d.batched &&
                     (d.batched || e.shape == d.shape) && e.slot_bytes <= d.slot_bytes,
                 ErrorCode::kInternal,
                 "progressive resolution: tensor " + d.name + " " + d.shape.str() + " is " + e.name + " " +
                     e.shape.str() + " at " + sample.str());
  }
  return sp;
}
}  // namespace

namespace {
// CompileOptions::speculative_update: the plan with the early updates' backups, each live from the
// backward time of its part's layer (the update at the end of DEEP_FWD_BWD: after the last deep layer's),
// no part placed before the first layer (the backward's order) at which the plan is no larger than `base`,
// or where it is smallest.
MemoryPlan plan_speculative(CompiledModel& m, const ArchPlan& fresh, const MemoryPlan& base) {
  const int fp = first_param_index(fresh);
  m.speculative = true;
  m.plans[static_cast<int>(Variant::TRAIN_BASE)] = std::make_unique<MemoryPlan>(base);
  const std::vector<CompiledModel::SpeculativeBackup> ranges = compile_detail::speculative_ranges(m);
  m.plans[static_cast<int>(Variant::TRAIN_BASE)].reset();
  // the layers a part may wait for, latest first: conv layers with parameters past the first layer's
  std::vector<int32_t> wait_for;
  int32_t top = -1;
  for (const auto& r : ranges) top = std::max(top, r.layer);
  for (int32_t i = top; i > fp; --i)
    if (fresh.layers[static_cast<size_t>(i)].kind == LayerKind::CONV) wait_for.push_back(i);
  if (wait_for.empty()) wait_for.push_back(-1);
  auto plan_with = [&](int32_t c) {
    m.arch = fresh;
    m.speculative_backups = ranges;
    m.speculative_layer = c;
    return plan_tensors(m);
  };
  int32_t best = wait_for.front();
  uint64_t best_bytes = 0;
  for (const int32_t c : wait_for) {
    MemoryPlan q = plan_with(c);
    if (q.total_bytes() <= base.total_bytes()) return q;
    if (c == wait_for.front() || q.total_bytes() < best_bytes) best = c, best_bytes = q.total_bytes();
  }
  return plan_with(best);
}
}  // namespace

void Compiler::create_memory_plans(CompiledModel& m) {
  const ArchPlan fresh = m.arch;  // before plan_tensors assigns its handles: the other sizes start from it
  MemoryPlan p = plan_tensors(m);
  const bool speculative = m.options.speculative_update == CompileOptions::SpeculativeUpdate::ON;
  FRESCO_CHECK(
      !speculative || compile_detail::speculative_update_possible(m), ErrorCode::kBadConfig,
      "speculative_update on: needs fp16 with a conv first layer and an early update "
      "(overlap_weight_gradients, early_update not off), sgd or adam(w) (not LARS), one rank, no deferred "
      "update and the updates writing the 16-bit copies (fused_weight_cast)");
  if (speculative) p = plan_speculative(m, fresh, p);
  std::vector<std::pair<Shape, MemoryPlan>> other_sizes;  // the progressive stages' tensors
  // One plan per present variant: same offsets, shapes at that variant's batch and input size.
  for (int v = 0; v < kVariantCount; ++v) {
    const int64_t b = m.batch_of[v];
    if (b == 0) continue;
    const Shape& sample = m.sample_of[v];
    const MemoryPlan* shapes = &p;
    if (!(sample == m.arch.input_sample)) {
      auto it = std::find_if(other_sizes.begin(), other_sizes.end(),
                             [&](const auto& o) { return o.first == sample; });
      if (it == other_sizes.end()) it = other_sizes.insert(it, {sample, plan_at(m, fresh, sample, p)});
      shapes = &it->second;
    }
    MemoryPlan vp = p;
    for (const DTensor& d : p.tensors())
      if (d.batched) vp.mutable_tensor(d.id).shape = shapes->tensor(d.id).shape.with_batch(b);
    m.plans[v] = std::make_unique<MemoryPlan>(std::move(vp));
  }
}

// Feature lifetimes from the nodes themselves: the training step and the inference pass are emitted into a
// scratch graph on the feature timeline (0 normalise, i+1 forward of layer i, L+1 loss, 2L+1-i backward of
// layer i; inference forward at the same times), and every feature map or gradient ends at the last node
// that touches it. A map that no backward reads (a batchnorm output feeding a residual join, say) is freed
// after its last forward reader. Side-stream nodes (weight gradients) keep what they touch until the next
// node that joins the side stream (a conv's input gradient; with GraphNode::join_lag the one after it), or
// to the end (joined before the optimizer).
static void fit_feature_lifetimes(CompiledModel& m, MemoryPlan& p) {
  const ArchPlan& a = m.arch;
  const int L = static_cast<int>(a.layers.size());
  const int end = 2 * L + 3;
  const int fp = first_param_index(a);
  std::vector<int> last(p.tensors().size(), -1);
  ComputationGraph scratch(ComputationGraph::Kind::TRAIN);
  // Side-stream nodes not yet joined: issued before the last lagged join (joined at the next join), and
  // since. A side node may run from its fork, so what it touches lives from then (a forked shortcut's maps,
  // CompileOptions::fork_shortcuts, begin before their layers' own times).
  std::vector<size_t> pending_before, pending_side;
  std::vector<int> forked_at(p.tensors().size(), end + 1);
  auto each_tensor = [](const GraphNode& n, auto f) {
    for (const auto* ids : {&n.in, &n.out})
      for (TensorId id : *ids)
        if (id >= 0) f(static_cast<size_t>(id));
  };
  auto touch = [&](const GraphNode& n, int when) {
    each_tensor(n, [&](size_t id) { last[id] = std::max(last[id], when); });
  };
  auto fork = [&](const GraphNode& n, int when) {
    each_tensor(n, [&](size_t id) { forked_at[id] = std::min(forked_at[id], when); });
  };
  auto at = [&](int t, const std::function<void(EmitContext&)>& emit) {
    EmitContext cx{&scratch, GraphId::DEEP_FWD_BWD, &m.t, &m.options};
    const size_t before = scratch.nodes(GraphId::DEEP_FWD_BWD).size();
    emit(cx);
    const auto& nodes = scratch.nodes(GraphId::DEEP_FWD_BWD);
    for (size_t k = before; k < nodes.size(); ++k) {
      if (nodes[k].join_side) {  // what the join waits for ends here (runtime.cpp, finish_capture)
        for (size_t s : pending_before) touch(nodes[s], t);
        pending_before.clear();
        if (nodes[k].join_lag)
          std::swap(pending_before, pending_side);
        else
          for (size_t s : pending_side) touch(nodes[s], t);
        pending_side.clear();
      }
      if (nodes[k].side_stream) {
        pending_side.push_back(k);
        fork(nodes[k], t);
      } else {
        touch(nodes[k], t);
      }
    }
  };
  at(0, [&](EmitContext& cx) { emit_input(cx, m, 'A'); });
  for (int i = 0; i < L; ++i) at(i + 1, [&](EmitContext& cx) { emit_forward(cx, m, i); });
  at(L + 1, [&](EmitContext& cx) { emit_loss(cx, m, true); });
  for (int i = L - 1; i > fp; --i)
    at(2 * L + 1 - i,
       [&](EmitContext& cx) { emit_backward(cx, m, i, a.layers[static_cast<size_t>(i)].grad_in); });
  const auto& first = a.layers[static_cast<size_t>(fp)];
  at(2 * L + 1 - fp, [&](EmitContext& cx) {
    if (first.grad_sum_a != kNoTensor)
      cx.add(add_node(first.grad_sum_a, first.grad_sum_b, first.grad_out, "grad " + first.name));
    rule_for(first.kind).backward(cx, first, layer_input(m, fp), first.out, first.grad_out, kNoTensor);
  });
  for (const auto* pending : {&pending_before, &pending_side})  // joined at the end
    for (size_t s : *pending) touch(scratch.nodes(GraphId::DEEP_FWD_BWD)[s], end);
  pending_before.clear();
  pending_side.clear();
  std::vector<TensorId> value(static_cast<size_t>(L));
  at(0, [&](EmitContext& cx) { emit_input(cx, m, 'A'); });
  for (const auto& l : a.layers)
    at(l.index + 1, [&](EmitContext& cx) { emit_inference_forward(cx, m, l, value); });
  at(L + 1, [&](EmitContext& cx) { emit_loss(cx, m, false); });
  for (size_t id = 0; id < last.size(); ++id) {
    DTensor& d = p.mutable_tensor(static_cast<TensorId>(id));
    if (region_family(d.region) != Family::F) continue;
    if (forked_at[id] < d.live_begin) d.live_begin = forked_at[id];
    if (last[id] >= 0) d.live_end = std::max(d.live_begin, last[id]);
  }
}

}  // namespace fresco
