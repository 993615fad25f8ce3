// Compiler: the five stages from a BluePrint to memory plans, zero-shape graphs and the GraphAtlas. Stage 0
// (the layers and their fusions) is compiler/arch_plan.cpp, stage 3 (the memory plan)
// compiler/memory_planning.cpp; the nodes stage 4 assembles here come from compiler/emit_layers.cpp and
// compiler/emit_update.cpp.
#include "fresco/core/compiler.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>

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
using compile_detail::emit_transfer;
using compile_detail::fc_macs;
using compile_detail::first_param_index;
using compile_detail::layer_input;
using compile_detail::range_node;
using layers::EmitContext;
using layers::rule_for;

namespace {
// A training stage's per-sample input: `h` x `w` of the progressive resolution (0: the input's).
Shape stage_sample(const Shape& input, int64_t h, int64_t w) {
  return Shape{1, h > 0 ? h : input.h, w > 0 ? w : input.w, input.c};
}

// Training batchnorm needs more than one value per channel (PyTorch refuses it too): a batch of one sample
// on a 1x1 map, the last partial batch included, is refused here rather than by the kernel mid-run.
void check_batchnorm_values(const ArchPlan& a, const CompileOptions& o, int64_t train_batch, int64_t last,
                            const std::string& stage) {
  const int64_t smallest = last ? last : train_batch;
  for (const auto& l : a.layers)
    FRESCO_CHECK(l.kind != LayerKind::BN || smallest * l.in_sample.h * l.in_sample.w >= 2,
                 ErrorCode::kBadConfig,
                 "layer " + l.spec.path + " (bn): training needs more than one value per channel, but the " +
                     (last ? "last batch (" + std::to_string(o.train_samples) + " samples in batches of " +
                                 std::to_string(train_batch) + ")"
                           : std::string("batch")) +
                     " has " + std::to_string(smallest) + " sample on a " + std::to_string(l.in_sample.h) +
                     "x" + std::to_string(l.in_sample.w) + " map" + stage + "; choose another batch size");
}
}  // namespace

void Compiler::derive_all_shapes(CompiledModel& m) {
  const CompileOptions& o = m.options;
  FRESCO_CHECK(o.batch > 0, ErrorCode::kBadConfig,
               "batch_size must be positive, found " + std::to_string(o.batch));
  FRESCO_CHECK(o.train_samples > 0, ErrorCode::kBadConfig, "training set is empty");
  const int64_t vb = o.val_batch > 0 ? o.val_batch : o.batch;
  const int64_t train_batch = std::min(o.batch, o.train_samples);
  const Shape in = m.arch.input_sample;
  const ProgressiveResolution& pr = o.progressive;
  const Shape begin = pr.enabled() ? stage_sample(in, pr.begin_h, pr.begin_w) : in;
  const Shape end = pr.enabled() ? stage_sample(in, pr.end_h, pr.end_w) : in;
  for (const Shape& s : {begin, end})
    FRESCO_CHECK(s.h >= 1 && s.w >= 1 && s.h <= in.h && s.w <= in.w, ErrorCode::kBadConfig,
                 "progressive_resolution: a stage of " + std::to_string(s.w) + "x" + std::to_string(s.h) +
                     " for inputs of " + std::to_string(in.w) + "x" + std::to_string(in.h) +
                     " (each side in [1, the input's])");
  m.batch_of.fill(0);
  m.sample_of.fill(in);
  m.batch_of[static_cast<int>(Variant::TRAIN_BASE)] = train_batch;
  m.batch_of[static_cast<int>(Variant::TRAIN_LOWRES)] = train_batch;
  const int64_t last = o.train_samples % train_batch;
  if (last) {
    m.batch_of[static_cast<int>(Variant::TRAIN_LAST)] = last;
    m.batch_of[static_cast<int>(Variant::TRAIN_LOWRES_LAST)] = last;
  }
  for (Variant v : {Variant::TRAIN_BASE, Variant::TRAIN_LAST}) m.sample_of[static_cast<int>(v)] = begin;
  for (Variant v : {Variant::TRAIN_LOWRES, Variant::TRAIN_LOWRES_LAST})
    m.sample_of[static_cast<int>(v)] = end;
  if (o.val_samples > 0) {
    const int64_t val_batch = std::min(vb, o.val_samples);
    m.batch_of[static_cast<int>(Variant::VAL_BASE)] = val_batch;
    if (o.val_samples % val_batch)
      m.batch_of[static_cast<int>(Variant::VAL_LAST)] = o.val_samples % val_batch;
  }
  for (const Shape& s : {begin, end})
    check_batchnorm_values(arch_at(m.arch, s), o, train_batch, last,
                           s == in ? std::string() : " (progressive resolution at " + s.str() + ")");
}

// Stage 2 is folded into allocation: every batched tensor is allocated at the largest batch of any variant,
// so its slot is the maximum over variants; this records that batch.
void Compiler::compute_max_slot_bytes(CompiledModel& m) {
  int64_t max_batch = 0;
  for (int64_t b : m.batch_of) max_batch = std::max(max_batch, b);
  m.options.val_batch = max_batch;  // remembered for create_memory_plans
}

// CompileOptions::defer_fc_weight_gradients: an fc weight-gradient node on the side stream moves after the
// next main-stream node when that node is an fc input gradient of at least `min_macs` multiply-adds (`macs`
// gives a node's), so the fork that precedes it waits for that input gradient too. Never past a node that
// joins the side stream; other nodes keep their order. Memory is unaffected: a side node's operands stay
// allocated until the next join (fit_feature_lifetimes), and it does not move past one.
static void defer_fc_weight_gradients(std::vector<GraphNode>& nodes,
                                      const std::function<int64_t(const GraphNode&)>& macs,
                                      int64_t min_macs) {
  auto fc_params = [](const GraphNode& n) -> std::optional<FrFcBackwardParams> {
    if (n.op != FR_OP_FC_BACKWARD) return std::nullopt;
    return n.params_as<FrFcBackwardParams>();
  };
  auto fc_part = [&](const GraphNode& n) {
    const auto p = fc_params(n);
    return p ? static_cast<int>(p->part) : -1;
  };
  // What a node writes: its outputs, and dy (its first input) for an fc backward that masks dy in place with
  // its fused relu (ops.h).
  auto writes = [&](const GraphNode& n) {
    std::vector<TensorId> w = n.out;
    const auto p = fc_params(n);
    if (p && p->relu_mask && p->part != 2 && !n.in.empty()) w.push_back(n.in[0]);
    return w;
  };
  auto shares = [](const std::vector<TensorId>& a, const std::vector<TensorId>& b) {
    for (TensorId x : a)
      if (x >= 0 && std::find(b.begin(), b.end(), x) != b.end()) return true;
    return false;
  };
  // Whether `held` may run after `n` instead of before: neither writes what the other reads or writes.
  auto independent = [&](const GraphNode& held, const GraphNode& n) {
    const std::vector<TensorId> wn = writes(n), wh = writes(held);
    return !shares(wn, held.in) && !shares(wn, wh) && !shares(wh, n.in);
  };
  std::vector<GraphNode> out, held;
  out.reserve(nodes.size());
  auto flush = [&] {
    for (GraphNode& h : held) out.push_back(std::move(h));
    held.clear();
  };
  for (GraphNode& n : nodes) {
    if (n.side_stream && fc_part(n) == 2) {
      held.push_back(std::move(n));
      continue;
    }
    bool passes = !n.side_stream && !n.join_side && fc_part(n) == 1 && macs(n) >= min_macs;
    for (const GraphNode& h : held) passes = passes && independent(h, n);
    if (!passes) flush();
    out.push_back(std::move(n));
    if (passes) flush();
  }
  flush();
  nodes = std::move(out);
}

void Compiler::build_computation_graph(CompiledModel& m) {
  const ArchPlan& a = m.arch;
  const int L = static_cast<int>(a.layers.size());
  const int fp = first_param_index(a);
  m.train = std::make_unique<ComputationGraph>(ComputationGraph::Kind::TRAIN);
  m.inference = std::make_unique<ComputationGraph>(ComputationGraph::Kind::INFERENCE);
  ComputationGraph& tr = *m.train;
  // Train: first layer (per input buffer), deep forward + loss + backward, first-layer backward.
  for (char ab : {'A', 'B'}) {
    emit_transfer(tr, ab);
    EmitContext cx{&tr, ab == 'A' ? GraphId::FIRST_LAYER_FWD_A : GraphId::FIRST_LAYER_FWD_B, &m.t,
                   &m.options};
    emit_input(cx, m, ab);
    for (int i = 0; i <= fp; ++i) emit_forward(cx, m, i);
  }
  EmitContext dx{&tr, GraphId::DEEP_FWD_BWD, &m.t, &m.options};
  for (int i = fp + 1; i < L; ++i) emit_forward(dx, m, i);
  emit_loss(dx, m, true);
  for (int i = L - 1; i > fp; --i) emit_backward(dx, m, i, a.layers[static_cast<size_t>(i)].grad_in);
  if (m.options.overlap_weight_gradients && m.options.defer_fc_weight_gradients) {
    auto macs = [&](const GraphNode& n) -> int64_t {  // an fc backward node's layer, found by its weight
      for (const auto& l : a.layers)
        if (l.weight != kNoTensor && n.in.size() > 2 && n.in[2] == l.weight) return fc_macs(m.options, l);
      return 0;
    };
    defer_fc_weight_gradients(tr.mutable_nodes(GraphId::DEEP_FWD_BWD), macs, m.options.defer_fc_min_macs);
  }
  // The first layer's output gradient, when two layers contribute, is summed in DEEP_FWD_BWD too.
  const auto& first = a.layers[static_cast<size_t>(fp)];
  if (first.grad_sum_a != kNoTensor)
    dx.add(add_node(first.grad_sum_a, first.grad_sum_b, first.grad_out, "grad " + first.name));
  // First-layer backward (its weight gradient only).
  for (char ab : {'A', 'B'}) {
    if (m.options.freeze_first_layer) break;  // no weight gradient: FIRST_LAYER_BWD stays empty
    EmitContext bx{&tr, ab == 'A' ? GraphId::FIRST_LAYER_BWD_A : GraphId::FIRST_LAYER_BWD_B, &m.t,
                   &m.options};
    rule_for(first.kind).backward(bx, first, layer_input(m, fp), first.out, first.grad_out, kNoTensor);
  }
  if (m.options.ranks > 1)  // every gradient, averaged over the ranks before the update (DESIGN §10)
    tr.add(GraphId::DEEP_COMM,
           range_node(FR_OP_ALLREDUCE_MEAN, {},
                      {RangeRef::regions(param_region(Family::G, ParamKind::BN_BIAS),
                                         param_region(Family::G, ParamKind::DEEP_CONV), DType::F32)},
                      "gradient all-reduce"));
  compile_detail::emit_update(tr, m);
  // The step's metrics read only the loss's sums: with a side stream they run there, beside the backward
  // (the executor fuses ACCUM_METRICS between DEEP_FWD_BWD and the first layer's backward).
  tr.add(GraphId::ACCUM_METRICS,
         range_node(FR_OP_ACCUMULATE_METRICS, {RangeRef::of(m.t.batch_train, DType::U8)},
                    {RangeRef::of(m.t.acc_train, DType::U8)}, "metrics"))
      .side_stream = m.options.overlap_weight_gradients;
  tr.add(GraphId::CLEAR_METRICS,
         range_node(FR_OP_CLEAR, {}, {RangeRef::of(m.t.acc_train, DType::U8)}, "clear train"));
  tr.add(GraphId::CLEAR_METRICS,
         range_node(FR_OP_CLEAR, {}, {RangeRef::of(m.t.acc_val, DType::U8)}, "clear val"));
  // Inference: the forward pass with views for dropout, loss without gradient, accumulation.
  ComputationGraph& inf = *m.inference;
  for (char ab : {'A', 'B'}) {
    emit_transfer(inf, ab);
    EmitContext cx{&inf, ab == 'A' ? GraphId::INF_MAIN_A : GraphId::INF_MAIN_B, &m.t, &m.options};
    emit_input(cx, m, ab);
    std::vector<TensorId> value(
        static_cast<size_t>(L));  // the tensor holding each layer's output in inference
    for (const auto& l : a.layers) emit_inference_forward(cx, m, l, value);
    const TensorId cur = value.back();
    FRESCO_CHECK(cur == m.t.logits, ErrorCode::kBadConfig,
                 "model: a layer that is a view only in inference (dropout) cannot be the last layer");
    emit_loss(cx, m, false);
    cx.add(range_node(FR_OP_ACCUMULATE_METRICS, {RangeRef::of(m.t.batch_val, DType::U8)},
                      {RangeRef::of(m.t.acc_val, DType::U8)}, "metrics"));
  }
  // Once before an evaluation pass (Executor::evaluate): batchnorm's folded inference form.
  EmitContext px{&inf, GraphId::UPDATE_BN_INF_PARAMS, &m.t, &m.options};
  for (const auto& l : a.layers) rule_for(l.kind).inference_prepare(px, l);
}

void Compiler::share_or_clone(CompiledModel& m) {
  for (int v = 0; v < kVariantCount; ++v) {
    if (!m.plans[v]) continue;
    const auto var = static_cast<Variant>(v);
    const Shape s = m.sample_of[v];
    const ShapeId id{static_cast<int32_t>(m.batch_of[v]), static_cast<int32_t>(s.h),
                     static_cast<int32_t>(s.w), static_cast<int32_t>(s.c)};
    m.atlas.assign(var, is_train(var) ? m.train.get() : m.inference.get(), m.plans[v].get(), id);
  }
  m.atlas.dedup();
}

namespace {
// The schedule against the run it drives (the device computes it in 32-bit steps).
void check_schedule(const CompileOptions& o) {
  const Scheduler& s = o.scheduler;
  FRESCO_CHECK(o.total_steps >= 0 && o.total_steps <= INT32_MAX, ErrorCode::kBadConfig,
               "the run has " + std::to_string(o.total_steps) + " steps; at most " +
                   std::to_string(INT32_MAX) + " are supported");
  FRESCO_CHECK(
      !s.runs_as_table(), ErrorCode::kBadConfig,
      std::string("scheduler: a ") + s.name() +
          " schedule is compiled as its per-step table (Scheduler::step_table, as DeepLearningTask does)");
  if (s.type == Scheduler::Type::TABLE) {
    // a table of momenta needs SGD's buffer, and momenta above 0 (one-cycle's, DeepLearningTask::plan)
    const bool sgd = o.optimizer.type == Optimizer::Type::SGD || o.optimizer.type == Optimizer::Type::LARS;
    FRESCO_CHECK(s.momenta.empty() || !sgd || o.optimizer.momentum > 0.0f, ErrorCode::kBadConfig,
                 "scheduler: a table of momenta for SGD needs optimizer.momentum > 0 (its buffer)");
    for (float mu : s.momenta)
      FRESCO_CHECK(
          !sgd || mu > 0.0f, ErrorCode::kBadConfig,
          "scheduler: a table of momenta for SGD must keep them above 0, found " + std::to_string(mu));
    return;
  }
  if (o.steps_per_epoch > 0 && o.total_steps > 0)  // a plan without data has no step counts to check
    FRESCO_CHECK(static_cast<int64_t>(s.warmup_epochs) * o.steps_per_epoch <= o.total_steps,
                 ErrorCode::kBadConfig,
                 "scheduler.warmup_epochs: a warm-up of " + std::to_string(s.warmup_epochs) +
                     " epochs is longer than the run (" + std::to_string(o.total_steps / o.steps_per_epoch) +
                     " epochs): the lr would never reach optimizer.lr");
  FRESCO_CHECK(s.type != Scheduler::Type::COSINE || s.min_lr <= o.optimizer.lr, ErrorCode::kBadConfig,
               "scheduler.min_lr " + std::to_string(s.min_lr) + " is above optimizer.lr " +
                   std::to_string(o.optimizer.lr) + ": the cosine schedule would rise");
}
}  // namespace

CompiledModel Compiler::compile(const BluePrint& bp, const CompileOptions& o) {
  o.loss.validate();
  o.optimizer.validate();
  o.scheduler.validate();
  check_schedule(o);
  o.normalize.validate(o.input_sample.c);
  FRESCO_CHECK(o.ranks >= 1 && o.ranks <= 4096, ErrorCode::kBadConfig,
               "ranks must be 1 to 4096, found " + std::to_string(o.ranks));
  FRESCO_CHECK(o.ranks == 1 || o.precision != DType::F16, ErrorCode::kBadConfig,
               "fp16 with several ranks is not built: its loss-scale check would see one rank's gradients "
               "(use bf16 or fp32)");
  FRESCO_CHECK(o.ranks == 1 || o.early_update != CompileOptions::EarlyUpdate::ON, ErrorCode::kBadConfig,
               "early_update with several ranks: an update must wait for the gradients' all-reduce");
  using DU = CompileOptions::DeferredUpdate;
  const bool lars = o.optimizer.type == Optimizer::Type::LARS;
  const bool copies = o.precision == DType::F32 || o.fused_weight_cast;
  FRESCO_CHECK(o.deferred_update != DU::ON || (!lars && o.ranks == 1 && copies), ErrorCode::kBadConfig,
               std::string("deferred_update on: ") +
                   (lars ? "LARS updates tensor by tensor after its norms, not in the deferred ranges"
                    : o.ranks > 1 ? "with several ranks the update waits for the gradients' all-reduce"
                                  : "in mixed precision it needs the updates to write the weight copies "
                                    "(fused_weight_cast)"));
  CompiledModel m;
  m.options = o;
  m.arch = derive_arch_plan(bp, o);
  derive_all_shapes(m);
  compute_max_slot_bytes(m);
  create_memory_plans(m);
  build_computation_graph(m);
  share_or_clone(m);
  m.options.val_batch = o.val_batch;
  return m;
}

}  // namespace fresco
