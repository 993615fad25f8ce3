// Compiler stage 4's step tail: the low-precision gradients cast to fp32 (fp16: unscaled and checked), the
// optimizer's updates over region ranges per parameter group, the W -> A casts, the loss scale update and
// step_done, and CompileOptions::early_update's parts in DEEP_FWD_BWD on the side stream. Tests:
// tests/core/test_mixed_precision_plan.cpp, test_early_update*.cpp, test_freeze_first_layer_plan.cpp.
#include <algorithm>
#include <initializer_list>
#include <optional>

#include "compiler/compile_internal.h"
#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco::compile_detail {

namespace {

FrScheduleParams schedule_params(const CompileOptions& o) {
  const Scheduler& s = o.scheduler;
  FrScheduleParams sp{};
  sp.base_lr = o.optimizer.lr;
  sp.min_lr = s.min_lr;
  sp.warmup_steps =
      static_cast<int32_t>(static_cast<int64_t>(s.warmup_epochs) * o.steps_per_epoch);  // checked
  sp.total_steps = static_cast<int32_t>(o.total_steps);
  sp.table_len = static_cast<int32_t>(s.table.size());
  sp.kind = s.type == Scheduler::Type::COSINE  ? FR_SCHED_COSINE
            : s.type == Scheduler::Type::TABLE ? FR_SCHED_TABLE
                                               : FR_SCHED_CONSTANT;
  return sp;
}

// CompileOptions::early_update: whether the gradients stored after the first layer's (in each parameter
// group) are made final at the end of DEEP_FWD_BWD on the side stream: cast (fp16: and unscaled) and, but
// in fp16, applied there too. fp16's loss scaling skips the whole update on an inf or NaN in any gradient,
// the first layer's too, so its update waits for OPTIMIZER.
bool early_grads_on(const CompiledModel& m) {
  const CompileOptions& co = m.options;
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  const bool large_first_fc = first.kind == LayerKind::FC && fc_macs(co, first) >= co.early_update_min_macs;
  const bool mixed_first_conv = co.precision != DType::F32 && first.kind == LayerKind::CONV;
  return co.overlap_weight_gradients &&
         (co.early_update == CompileOptions::EarlyUpdate::ON ||
          (co.early_update == CompileOptions::EarlyUpdate::AUTO && (large_first_fc || mixed_first_conv)));
}
bool early_update_on(const CompiledModel& m) {
  // LARS updates tensor by tensor (its trust ratios), not in the byte parts the early update cuts
  // nor with several ranks: an update must wait for the gradients' all-reduce (CompileOptions::ranks)
  // (CompileOptions::deferred_update: the updates wait for the next step instead); fp16 only with backups
  // to restore on a skipped step (CompileOptions::speculative_update)
  return early_grads_on(m) && (m.options.precision != DType::F16 || m.speculative) &&
         m.options.optimizer.type != Optimizer::Type::LARS && m.options.ranks == 1 && !m.update_deferred();
}

// CompileOptions::fused_weight_cast: whether the updates of conv weights write their A copy themselves.
bool fused_cast_on(const CompiledModel& m) {
  return m.options.precision != DType::F32 && m.options.fused_weight_cast &&
         m.options.optimizer.type != Optimizer::Type::LARS;
}

// Bytes of `span` up to the end of the last of `ids` (the first layer's tensors) stored in it; 0: none is.
uint64_t first_layer_cut(const MemoryPlan& p, const RegionSpan& span, std::initializer_list<TensorId> ids) {
  uint64_t cut = 0;
  for (TensorId id : ids) {
    if (id == kNoTensor) continue;
    const DTensor& t = p.tensor(id);
    const auto at = static_cast<uint64_t>(t.offset);
    if (at >= span.offset && at < span.offset + span.bytes)
      cut = std::max<uint64_t>(cut, at + t.slot_bytes - span.offset);
  }
  return cut;
}

// The step scalars the updates read: the step's own, or with a deferred update (CompileOptions::
// deferred_update) the copy STEP_END keeps of them for the update at the start of the next step.
RangeRef update_scalars(const CompiledModel& m) {
  return RangeRef::of(m.update_deferred() ? m.t.update_scalars : m.t.step_scalars, DType::U8);
}

// Parameter groups as region ranges: the no-decay kinds come first in every family, DEEP_CONV last.
struct ParamGroup {
  ParamKind first, last;
  float wd;
};
std::vector<ParamGroup> param_groups(const Optimizer& o) {
  if (o.no_decay_1d)
    return {{ParamKind::BN_BIAS, ParamKind::FC_BIAS, 0.0f},
            {ParamKind::FC_WEIGHT, ParamKind::DEEP_CONV, o.weight_decay}};
  return {{ParamKind::BN_BIAS, ParamKind::DEEP_CONV, o.weight_decay}};
}

// The optimizer's update of bytes [skip, skip + take) (take -1: to the end) of group gr's W span (and the
// same part of G, M, V).
GraphNode update_node(const CompiledModel& m, const ParamGroup& gr, uint64_t skip, int64_t take) {
  const Optimizer& o = m.options.optimizer;
  const RangeRef scalars = update_scalars(m);
  auto rr = [&](Family f) {
    return RangeRef::part(param_region(f, gr.first), param_region(f, gr.last), skip, take);
  };
  // a scheduler's per-step momentum (one-cycle's; ops.h, FR_KERNEL_STEP_MOMENTUM) as the third range input
  std::vector<RangeRef> rin = {rr(Family::G), scalars};
  if (m.t.momentum_table != kNoTensor) rin.push_back(RangeRef::values_of(m.t.momentum_table, DType::F32));
  GraphNode n;
  if (o.type == Optimizer::Type::LARS && gr.last == ParamKind::DEEP_CONV) {
    n = range_node(FR_OP_LARS_UPDATE, rin, {rr(Family::W), rr(Family::M)}, "lars");  // one tensor
    n.with_params(FrLarsParams{o.momentum, gr.wd, o.eta, 0});
  } else if (o.type == Optimizer::Type::SGD || o.type == Optimizer::Type::LARS) {
    // LARS's excluded (1-D) parameters: its momentum step without decay or trust ratio, SGD's
    std::vector<RangeRef> rout = {rr(Family::W)};
    if (o.uses_m()) rout.push_back(rr(Family::M));
    n = range_node(FR_OP_SGD_UPDATE, rin, rout, o.type == Optimizer::Type::LARS ? "lars (1-d)" : "sgd");
    n.with_params(FrSgdParams{o.momentum, gr.wd, o.nesterov ? 1 : 0, 0});
  } else {
    n = range_node(FR_OP_ADAM_UPDATE, rin, {rr(Family::W), rr(Family::M), rr(Family::V)}, o.name());
    n.with_params(FrAdamParams{o.beta1, o.beta2, o.eps, gr.wd, o.type == Optimizer::Type::ADAMW ? 1 : 0, 0});
  }
  return n;
}

// A parameter group's W span, in whose bytes update_node counts.
RegionSpan group_span(const MemoryPlan& p, const ParamGroup& gr) {
  return p.region_range(param_region(Family::W, gr.first), param_region(Family::W, gr.last));
}

// The conv kinds' W span (FIRST_CONV..DEEP_CONV), in whose bytes conv_cast_node counts.
RegionSpan conv_span(const MemoryPlan& p) {
  return p.region_range(param_region(Family::W, ParamKind::FIRST_CONV),
                        param_region(Family::W, ParamKind::DEEP_CONV));
}

// Bytes [skip, skip + take) of the conv kinds' span (FIRST_CONV..DEEP_CONV) counted in W-family (f32) bytes,
// as the same part of family f in dtype t: a 16-bit family (A, G16) holds half the bytes. take -1: to the
// end.
RangeRef conv_part(Family f, DType t, uint64_t skip, int64_t take) {
  const uint64_t k = dtype_size(t) == 2 ? 2 : 1;
  return RangeRef::part(param_region(f, ParamKind::FIRST_CONV), param_region(f, ParamKind::DEEP_CONV),
                        skip / k, take < 0 ? -1 : take / static_cast<int64_t>(k), t);
}

// The update of bytes [skip, skip + take) of group gr's W span (take -1: to the end) as update_node's, with
// fused_weight_cast or update_from_grads16 the part in the conv kinds' span (FIRST_CONV..DEEP_CONV, the end
// of the group that ends with DEEP_CONV) as a node of its own that also writes that part of A (ops.h, the
// weight copy) or reads that part of G16 as its gradients (ops.h, the 16-bit gradients).
std::vector<GraphNode> update_nodes(const CompiledModel& m, const ParamGroup& gr, uint64_t skip,
                                    int64_t take) {
  const MemoryPlan& p = m.base_plan();
  const RegionSpan group = group_span(p, gr);
  const RegionSpan conv = conv_span(p);
  const uint64_t end = take < 0 ? group.bytes : skip + static_cast<uint64_t>(take);
  const uint64_t conv_lo = conv.offset - group.offset;
  const bool copy = fused_cast_on(m), grads16 = m.updates_read_grads16();
  if ((!copy && !grads16) || gr.last != ParamKind::DEEP_CONV || conv.bytes == 0 || end <= conv_lo)
    return {update_node(m, gr, skip, take)};
  std::vector<GraphNode> out;
  const uint64_t lo = std::max(skip, conv_lo);
  if (skip < lo) out.push_back(update_node(m, gr, skip, static_cast<int64_t>(lo - skip)));
  const int64_t rest = take < 0 ? -1 : static_cast<int64_t>(end - lo);
  GraphNode n = update_node(m, gr, lo, rest);
  auto low = [&](Family f) { return conv_part(f, m.options.precision, lo - conv_lo, rest); };
  if (grads16) {
    n.rin.front() = low(Family::G16);
    n.label += " from 16-bit gradients";
  }
  if (copy) {
    n.rout.push_back(low(Family::A));
    n.label += " and weight copy";
  }
  out.push_back(std::move(n));
  return out;
}

// CompileOptions::speculative_update: what restore_if_skipped puts back for one early update, the backups
// (sources) over the f32 ranges it writes (destinations) and its 16-bit weight copy, if it writes one.
struct RestoreGroup {
  std::vector<RangeRef> src, dst;
  std::optional<RangeRef> copy;
};

// Sets params.backups on update n, whose params are P (ops.h, sgd_update's backups).
template <class P>
void set_backups(GraphNode& n) {
  auto p = n.params_as<P>();
  FRESCO_CHECK(p.has_value(), ErrorCode::kInternal, n.label + ": an optimizer update without its params");
  p->backups = 1;
  n.with_params(*p);
}

// The early updates `updates` (speculative: each keeping the f32 ranges it writes in their backups,
// CompiledModel::speculative_backups, recorded in `groups` for the restore: as the update's own trailing
// outputs, ops.h's backups, or by copy nodes before it, CompileOptions::speculative_backups); as they are
// otherwise.
std::vector<GraphNode> with_backups(const CompiledModel& m, std::vector<GraphNode> updates,
                                    std::vector<RestoreGroup>& groups) {
  if (!m.speculative) return updates;
  const bool in_update = m.options.speculative_backups == CompileOptions::SpeculativeBackups::IN_UPDATE;
  std::vector<GraphNode> out;
  for (GraphNode& n : updates) {
    RestoreGroup rg;
    for (const RangeRef& r : n.rout) {
      if (r.dtype != DType::F32) {
        rg.copy = r;
        continue;
      }
      const RegionSpan b = range_bytes(r, m.base_plan(), n.label);
      const auto& all = m.speculative_backups;
      const auto it = std::find_if(all.begin(), all.end(), [&](const CompiledModel::SpeculativeBackup& k) {
        return k.at == b.offset && k.bytes == b.bytes;
      });
      FRESCO_CHECK(it != all.end() && it->tensor != kNoTensor, ErrorCode::kInternal,
                   n.label + ": a speculative update's range has no backup planned");
      const RangeRef keep = RangeRef::values_of(it->tensor, DType::F16);
      if (!in_update) out.push_back(range_node(FR_OP_COPY, {r}, {keep}, "backup for " + n.label));
      rg.src.push_back(keep);
      rg.dst.push_back(r);
    }
    if (in_update) {  // the update's trailing outputs (ops.h, sgd_update's backups)
      n.rout.insert(n.rout.end(), rg.src.begin(), rg.src.end());
      FRESCO_CHECK(n.op == FR_OP_SGD_UPDATE || n.op == FR_OP_ADAM_UPDATE, ErrorCode::kInternal,
                   n.label + ": a speculative update that is neither sgd_update nor adam_update");
      if (n.op == FR_OP_SGD_UPDATE)
        set_backups<FrSgdParams>(n);
      else
        set_backups<FrAdamParams>(n);
      n.label += " keeping backups";
    }
    groups.push_back(std::move(rg));
    out.push_back(std::move(n));
  }
  return out;
}

// restore_if_skipped over `groups` (one node for those with a weight copy, one for those without), in
// OPTIMIZER after the updates and before the EMA, the loss scale's update and step_done (which read or
// clear the skip flag).
void emit_restores(ComputationGraph& g, const CompiledModel& m, const std::vector<RestoreGroup>& groups) {
  std::vector<GraphNode>& nodes = g.mutable_nodes(GraphId::OPTIMIZER);
  auto at = std::find_if(nodes.begin(), nodes.end(), [](const GraphNode& n) {
    return n.op == FR_OP_EMA_UPDATE || n.op == FR_OP_LOSS_SCALE_UPDATE || n.op == FR_OP_STEP_DONE;
  });
  for (const bool copies : {false, true}) {
    std::vector<RangeRef> rin, rout;
    int32_t per_group = 0;
    for (const RestoreGroup& rg : groups) {
      if (rg.copy.has_value() != copies) continue;
      FRESCO_CHECK(per_group == 0 || per_group == static_cast<int32_t>(rg.src.size()), ErrorCode::kInternal,
                   "speculative updates writing different numbers of f32 ranges");
      per_group = static_cast<int32_t>(rg.src.size());
      rin.insert(rin.end(), rg.src.begin(), rg.src.end());
      rout.insert(rout.end(), rg.dst.begin(), rg.dst.end());
      if (copies) rout.push_back(*rg.copy);
    }
    if (per_group == 0) continue;
    rin.push_back(RangeRef::of(m.t.step_scalars, DType::U8));
    GraphNode n = range_node(FR_OP_RESTORE_IF_SKIPPED, std::move(rin), std::move(rout),
                             copies ? "restore if skipped (with weight copies)" : "restore if skipped");
    n.with_params(FrRestoreParams{per_group, copies ? 1 : 0});
    at = nodes.insert(at, std::move(n)) + 1;
  }
}

// A cast over bytes [skip, skip + take) of the conv kinds' span (FIRST_CONV..DEEP_CONV) in W-family bytes:
// G16 -> G (fp16: with the unscale, unscale_grads) or W -> A.
GraphNode conv_cast_node(const CompiledModel& m, bool grads, uint64_t skip, int64_t take,
                         const std::string& label) {
  const DType low = m.options.precision;
  const RangeRef wide = conv_part(grads ? Family::G : Family::W, DType::F32, skip, take);
  const RangeRef narrow = conv_part(grads ? Family::G16 : Family::A, low, skip, take);
  if (!grads) return range_node(FR_OP_CAST_RANGE, {wide}, {narrow}, label);
  if (low == DType::F16)
    return range_node(FR_OP_UNSCALE_GRADS, {narrow}, {wide, RangeRef::of(m.t.step_scalars, DType::U8)},
                      label);
  return range_node(FR_OP_CAST_RANGE, {narrow}, {wide}, label);
}

// What the conv gradients of bytes [skip, skip + take) (W-family bytes, as conv_cast_node's) need before
// their updates: the G16 -> G cast (fp16: and unscale); with update_from_grads16, which has the updates read
// G16, fp16's check for inf and NaN alone (check_grads) and nothing in bf16.
std::vector<GraphNode> grad_cast_nodes(const CompiledModel& m, uint64_t skip, int64_t take,
                                       const std::string& label) {
  if (!m.updates_read_grads16()) return {conv_cast_node(m, true, skip, take, label)};
  if (m.options.precision != DType::F16) return {};
  return {range_node(FR_OP_CHECK_GRADS, {conv_part(Family::G16, m.options.precision, skip, take)},
                     {RangeRef::of(m.t.step_scalars, DType::U8)}, label)};
}

// CompileOptions::deferred_update: the arena offset in W_DEEP_CONV from which the deferred update runs on
// the update stream beside the next step's forward: the first deep conv weight that ends past 1/64 of the
// conv weights' bytes (ResNet-18: from stage 2 on, so the stem's and stage 1's, 1.3% of the bytes, run on
// the main stream before the forward, and the forward reaches stage 2 long after the rest is done). The
// region's end when it holds no conv weight.
uint64_t deferred_cut(const CompiledModel& m) {
  const MemoryPlan& p = m.base_plan();
  const RegionSpan conv = conv_span(p);
  const RegionSpan deep = p.region(param_region(Family::W, ParamKind::DEEP_CONV));
  uint64_t cut = deep.offset + deep.bytes;
  for (TensorId id : p.tensors_in(param_region(Family::W, ParamKind::DEEP_CONV))) {
    const DTensor& t = p.tensor(id);
    const auto at = static_cast<uint64_t>(t.offset);
    if ((at + t.slot_bytes - conv.offset) * 64 > conv.bytes) cut = std::min(cut, at);
  }
  return cut;
}

// CompileOptions::early_update_parts: byte ranges [lo, hi) (arena offsets) of W_DEEP_CONV, the last layers'
// first, each final once the weight gradient of `layer` (its first) is. None unless the deep conv weights
// are stored in layer order (the backward's order reversed).
struct EarlyPart {
  uint64_t lo, hi;
  int layer;
};
std::vector<EarlyPart> early_parts(const CompiledModel& m) {
  const int parts = m.options.early_update_parts;
  if (!early_update_on(m) || parts <= 0) return {};
  const MemoryPlan& p = m.base_plan();
  const Region deep_region = param_region(Family::W, ParamKind::DEEP_CONV);
  const std::vector<TensorId> deep = p.tensors_in(deep_region);
  for (size_t i = 1; i < deep.size(); ++i)
    if (p.tensor(deep[i]).layer <= p.tensor(deep[i - 1]).layer) return {};
  const RegionSpan span = p.region(deep_region);
  const uint64_t share = span.bytes / static_cast<uint64_t>(parts + 1);
  std::vector<EarlyPart> out;
  uint64_t hi = span.offset + span.bytes, bytes = 0;
  for (size_t i = deep.size(); i-- > 1 && static_cast<int>(out.size()) < parts;) {  // the first stays
    const DTensor& t = p.tensor(deep[i]);
    bytes += t.slot_bytes;
    if (bytes < share) continue;
    out.push_back({static_cast<uint64_t>(t.offset), hi, t.layer});
    hi = static_cast<uint64_t>(t.offset);
    bytes = 0;
  }
  return out;
}

// Arena offset where the early parts begin (the end of W_DEEP_CONV without parts).
uint64_t early_parts_begin(const CompiledModel& m, const std::vector<EarlyPart>& parts) {
  const RegionSpan deep = m.base_plan().region(param_region(Family::W, ParamKind::DEEP_CONV));
  return parts.empty() ? deep.offset + deep.bytes : parts.back().lo;
}

// The conv span split by the early update: [0, cut) the first layer's (late), [cut, end) at the end of
// DEEP_FWD_BWD, [end, bytes) the early parts. Without it (`early` false) all late.
struct ConvSplit {
  RegionSpan span;
  uint64_t cut, end;
};
ConvSplit conv_split(const CompiledModel& m, const std::vector<EarlyPart>& parts, bool early) {
  const MemoryPlan& p = m.base_plan();
  const RegionSpan span = conv_span(p);
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  return {span, early ? first_layer_cut(p, span, {first.weight}) : span.bytes,
          early_parts_begin(m, parts) - span.offset};
}

// Bytes [0, cut) of a span of `bytes` go to graph `late` (also when the span is empty), [cut, end) to
// graph `early_graph` (DEEP_FWD_BWD: the early update; OPTIMIZER: a deferred update's part beside the
// forward) on the side stream; make(skip, take, early) builds each part's nodes, take -1 meaning to the
// span's end. A hole [hole_lo, hole_hi) inside [0, cut) is left out (a frozen first layer's weight).
template <class Make>
void add_late_and_early(ComputationGraph& g, GraphId late, uint64_t bytes, uint64_t cut, uint64_t end,
                        Make make, uint64_t hole_lo = 0, uint64_t hole_hi = 0,
                        GraphId early_graph = GraphId::DEEP_FWD_BWD) {
  auto take = [&](uint64_t from, uint64_t to) {
    return to >= bytes ? int64_t{-1} : static_cast<int64_t>(to - from);
  };
  auto add = [&](GraphId id, uint64_t skip, int64_t tk, bool early) {
    for (GraphNode& n : make(skip, tk, early)) {
      n.side_stream = early;
      g.add(id, std::move(n));
    }
  };
  FRESCO_CHECK(hole_hi <= cut, ErrorCode::kInternal, "a range's hole lies past its late part");
  if (hole_hi > hole_lo) {
    if (hole_lo > 0) add(late, 0, take(0, hole_lo), false);
    if (cut > hole_hi) add(late, hole_hi, take(hole_hi, cut), false);
  } else if (cut > 0 || bytes == 0) {
    add(late, 0, take(0, cut), false);
  }
  if (cut < end) add(early_graph, cut, take(cut, end), true);
}

// Each early part's nodes (bf16: grad cast, update, weight cast or the update with its weight copy; fp32: the
// update) go into DEEP_FWD_BWD,
// detached, after the first join that follows the weight gradient of the part's first layer.
void place_early_parts(ComputationGraph& g, const CompiledModel& m, const std::vector<EarlyPart>& parts,
                       std::vector<RestoreGroup>& restores) {
  const MemoryPlan& p = m.base_plan();
  const bool mixed = m.options.precision != DType::F32;
  const RegionSpan conv = conv_span(p);
  const ParamGroup gr = param_groups(m.options.optimizer).back();  // the group that ends with DEEP_CONV
  const RegionSpan group = group_span(p, gr);
  std::vector<GraphNode>& nodes = g.mutable_nodes(GraphId::DEEP_FWD_BWD);
  for (size_t k = 0; k < parts.size(); ++k) {
    const EarlyPart& part = parts[k];
    // speculative: not before the layer where its backups fit (CompiledModel::speculative_layer)
    const int32_t layer =
        m.speculative && m.speculative_layer >= 0 ? std::min(part.layer, m.speculative_layer) : part.layer;
    const LayerDescriptor& l = m.arch.layers[static_cast<size_t>(layer)];
    const TensorId grad = mixed ? l.grad_weight_low : l.grad_weight;
    // After the first join that waits for the weight gradient: a full join, or a lagged one past another
    // join (a lagged join waits only for the side work issued before the join before it). Without one the
    // part's nodes stay on the side stream, ordered after the weight gradient (not detached).
    size_t at = nodes.size();
    bool detach = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (std::find(nodes[i].out.begin(), nodes[i].out.end(), grad) == nodes[i].out.end()) continue;
      at = i + 1;
      if (!nodes[i].side_stream) break;
      bool passed_join = false;
      while (at < nodes.size() && !(nodes[at].join_side && (!nodes[at].join_lag || passed_join))) {
        passed_join = passed_join || nodes[at].join_side;
        ++at;
      }
      detach = at < nodes.size();
      if (detach) ++at;  // after that join
      break;
    }
    const auto take = static_cast<int64_t>(part.hi - part.lo);
    const std::string tag = " (early part " + std::to_string(k + 1) + ")";
    std::vector<GraphNode> add;
    if (mixed)
      for (GraphNode& n : grad_cast_nodes(m, part.lo - conv.offset, take, "grad cast" + tag))
        add.push_back(std::move(n));
    std::vector<GraphNode> updates = update_nodes(m, gr, part.lo - group.offset, take);
    for (GraphNode& n : updates) n.label += tag;
    for (GraphNode& n : with_backups(m, std::move(updates), restores)) add.push_back(std::move(n));
    if (mixed && !fused_cast_on(m))
      add.push_back(conv_cast_node(m, false, part.lo - conv.offset, take, "weight cast" + tag));
    for (GraphNode& n : add) n.side_stream = true, n.detached = detach;
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at), add.begin(), add.end());
  }
}

// With an early update: the bytes of a parameter group's W span up to the end of the first layer's last
// parameter in it, which are updated late. The gamma of the batchnorm whose backward the first conv's
// weight gradient applies is read after DEEP_FWD_BWD, so it waits with the first layer's (an early update
// would race that read on the side stream).
uint64_t early_cut(const CompiledModel& m, const RegionSpan& span) {
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  const TensorId read_late = first.wgrad_prologue_bn >= 0
                                 ? m.arch.layers[static_cast<size_t>(first.wgrad_prologue_bn)].weight
                                 : kNoTensor;
  return first_layer_cut(m.base_plan(), span, {first.weight, first.bias, read_late});
}

// OPTIMIZER: one update per parameter group (region ranges), then step_done, which advances the step counter
// and writes the next step's lr (the lr of step 0 is written by the host at compile time). With an early
// update the parts past the first layer's are updated at the end of DEEP_FWD_BWD on the side stream (and the
// early parts before, place_early_parts); in bf16 each update's W -> A cast follows it.
void emit_optimizer(ComputationGraph& g, const CompiledModel& m, const std::vector<EarlyPart>& parts,
                    std::vector<RestoreGroup>& restores) {
  const RangeRef scalars = RangeRef::of(m.t.step_scalars, DType::U8);
  const MemoryPlan& p = m.base_plan();
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  const bool early = early_update_on(m);
  const uint64_t parts_begin = early_parts_begin(m, parts);
  for (const ParamGroup& gr : param_groups(m.options.optimizer)) {
    const RegionSpan span = group_span(p, gr);
    if (span.bytes == 0) continue;
    // The bytes past the cut have their gradients at the end of DEEP_FWD_BWD and are updated there
    // (CompileOptions::early_update).
    uint64_t cut = early ? early_cut(m, span) : span.bytes;
    // speculative (fp16): the conv weights only; the f32 gradients are unscaled after the last check
    if (m.speculative && gr.last != ParamKind::DEEP_CONV) cut = span.bytes;
    uint64_t end = gr.last == ParamKind::DEEP_CONV ? parts_begin - span.offset : span.bytes;
    if (m.update_deferred())  // the part past the cut beside the next step's forward (no early update then)
      cut = gr.last == ParamKind::DEEP_CONV ? deferred_cut(m) - span.offset : span.bytes, end = span.bytes;
    // A frozen first layer's weight (all of W_FIRST_CONV) is left out of the ranges.
    uint64_t hole_lo = 0, hole_hi = 0;
    if (m.options.freeze_first_layer) {
      const DTensor& w = p.tensor(first.weight);
      if (static_cast<uint64_t>(w.offset) >= span.offset &&
          static_cast<uint64_t>(w.offset) < span.offset + span.bytes)
        hole_lo = static_cast<uint64_t>(w.offset) - span.offset, hole_hi = hole_lo + w.slot_bytes;
    }
    if (m.options.optimizer.type == Optimizer::Type::LARS && gr.last == ParamKind::DEEP_CONV) {
      // one lars_update per weight tensor (its own trust ratio), a frozen first weight left out
      for (int k = static_cast<int>(gr.first); k <= static_cast<int>(gr.last); ++k)
        for (TensorId id : p.tensors_in(param_region(Family::W, static_cast<ParamKind>(k)))) {
          const DTensor& t = p.tensor(id);
          if (m.options.freeze_first_layer && id == first.weight) continue;
          const uint64_t skip = static_cast<uint64_t>(t.offset) - span.offset;
          GraphNode n = update_node(m, gr, skip, t.shape.numel() * static_cast<int64_t>(sizeof(float)));
          n.label += " " + t.name;
          g.add(GraphId::OPTIMIZER, n);
        }
      continue;
    }
    add_late_and_early(
        g, GraphId::OPTIMIZER, span.bytes, cut, end,
        [&](uint64_t skip, int64_t take, bool e) {
          std::vector<GraphNode> nodes = update_nodes(m, gr, skip, take);
          if (!e) return nodes;
          for (GraphNode& n : nodes) {
            n.label += m.update_deferred() ? " (beside the forward)" : " (early)";
            n.detached = m.update_deferred();
          }
          return with_backups(m, std::move(nodes), restores);
        },
        hole_lo, hole_hi, m.update_deferred() ? GraphId::OPTIMIZER : GraphId::DEEP_FWD_BWD);
  }
  const ConvSplit conv = conv_split(m, parts, early);
  if (early && m.options.precision != DType::F32 && !fused_cast_on(m) &&
      conv.span.bytes > 0)  // the W -> A casts after the updates
    add_late_and_early(g, GraphId::OPTIMIZER, conv.span.bytes, conv.cut, conv.end,
                       [&](uint64_t skip, int64_t take, bool e) {
                         return std::vector<GraphNode>{
                             conv_cast_node(m, false, skip, take, e ? "weight cast (early)" : "weight cast")};
                       });
  if (m.options.ema_decay > 0.0f) {  // the weights' average after every update of the step (ops.h)
    auto all = [](Family f) {
      return RangeRef::regions(param_region(f, ParamKind::BN_BIAS), param_region(f, ParamKind::DEEP_CONV),
                               DType::F32);
    };
    // with a deferred update on the update stream, after its part there (which it reads)
    GraphNode& ema =
        g.add(GraphId::OPTIMIZER,
              range_node(FR_OP_EMA_UPDATE, {all(Family::W), update_scalars(m)}, {all(Family::E)}, "ema"))
            .with_params(FrEmaParams{static_cast<float>(1.0 - m.options.ema_decay), m.options.ema_every});
    ema.side_stream = ema.detached = m.update_deferred();
  }
  // The step's end: with a deferred update in STEP_END, after a copy of the step's scalars for the update
  const GraphId end = m.update_deferred() ? GraphId::STEP_END : GraphId::OPTIMIZER;
  if (m.update_deferred())
    g.add(end, range_node(FR_OP_COPY, {scalars}, {update_scalars(m)}, "step scalars for the update"));
  if (m.options.precision == DType::F16)  // GradScaler.update: back off after a skipped step, grow after 2000
    g.add(end, range_node(FR_OP_LOSS_SCALE_UPDATE, {}, {scalars}, "loss scale"))
        .with_params(FrLossScaleParams{2.0f, 0.5f, 2000, 0});
  g.add(end,
        range_node(FR_OP_STEP_DONE, {RangeRef::of(m.t.lr_table, DType::F32)}, {scalars}, "step and next lr"))
      .with_params(m.schedule);
}
// The arena bytes [first, second) of a node's inputs (`written` false: tensors and ranges in) or outputs
// (true: out, rout) in plan p.
using ByteSpans = std::vector<std::pair<uint64_t, uint64_t>>;
ByteSpans operand_bytes(const GraphNode& n, const MemoryPlan& p, bool written) {
  ByteSpans out;
  auto tensor = [&](TensorId id) {
    if (id == kNoTensor) return;
    const DTensor& t = p.tensor(id);
    out.emplace_back(static_cast<uint64_t>(t.offset), static_cast<uint64_t>(t.offset) + t.slot_bytes);
  };
  for (TensorId id : written ? n.out : n.in) tensor(id);
  for (const RangeRef& r : written ? n.rout : n.rin) {
    if (r.kind == RangeRef::Kind::TENSOR) tensor(r.tensor);
    if (r.kind != RangeRef::Kind::REGIONS) continue;
    const RegionSpan b = range_bytes(r, p, n.label);
    out.emplace_back(b.offset, b.offset + b.bytes);
  }
  return out;
}

bool overlap(const ByteSpans& a, const ByteSpans& b) {
  for (const auto& [lo, hi] : a)
    for (const auto& [x, y] : b)
      if (lo < y && x < hi) return true;
  return false;
}

// CompileOptions::deferred_update: the first node of the step (FIRST_LAYER_FWD_A and _B, then the pieces
// after them in the executor's order) that reads or writes what the update's part on the update stream
// writes (weights, their 16-bit copies, buffers, the EMA), or writes what it reads (the gradients, the kept
// scalars), waits for that part (GraphNode::join_update); reading what it only reads (the EMA's every
// weight) is no conflict. A step without a pending update has nothing on that stream to wait for.
void mark_update_joins(ComputationGraph& g, const CompiledModel& m) {
  const MemoryPlan& p = m.base_plan();
  ByteSpans reads, writes;
  for (const GraphNode& n : g.nodes(GraphId::OPTIMIZER))
    if (n.detached) {
      for (const auto& b : operand_bytes(n, p, false)) reads.push_back(b);
      for (const auto& b : operand_bytes(n, p, true)) writes.push_back(b);
    }
  if (writes.empty()) return;
  auto touches = [&](const GraphNode& n) {
    const ByteSpans out = operand_bytes(n, p, true);
    return overlap(operand_bytes(n, p, false), writes) || overlap(out, writes) || overlap(out, reads);
  };
  for (bool b : {false, true})
    for (GraphId gid : {b ? GraphId::FIRST_LAYER_FWD_B : GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD,
                        b ? GraphId::FIRST_LAYER_BWD_B : GraphId::FIRST_LAYER_BWD_A, GraphId::GRAD_CAST,
                        GraphId::NAN_CHECK_AND_GRAD_SCALING, GraphId::STEP_END}) {
      std::vector<GraphNode>& nodes = g.mutable_nodes(gid);
      const auto it = std::find_if(nodes.begin(), nodes.end(), touches);
      if (it == nodes.end()) continue;
      it->join_update = true;
      break;
    }
}
}  // namespace

bool speculative_update_possible(const CompiledModel& m) {
  // the updates write the 16-bit copies (fused_weight_cast), so the restore recasts those it undoes; a
  // conv first layer, so the early pieces hold conv weights only (their 16-bit gradients checked early):
  // after a first fc the other fc weights would fall in them, whose f32 gradients are unscaled late
  const CompileOptions& o = m.options;
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  return o.precision == DType::F16 && first.kind == LayerKind::CONV && early_grads_on(m) &&
         o.optimizer.type != Optimizer::Type::LARS && o.ranks == 1 && !m.update_deferred() &&
         fused_cast_on(m);
}

std::vector<CompiledModel::SpeculativeBackup> speculative_ranges(const CompiledModel& m) {
  FRESCO_CHECK(m.speculative, ErrorCode::kInternal, "speculative_ranges without a speculative update");
  std::vector<CompiledModel::SpeculativeBackup> out;
  const MemoryPlan& p = m.base_plan();
  auto keep = [&](const std::vector<GraphNode>& nodes, int32_t layer) {
    for (const GraphNode& n : nodes)
      for (const RangeRef& r : n.rout)
        if (r.dtype == DType::F32) {
          const RegionSpan b = range_bytes(r, p, n.label);
          out.push_back({b.offset, b.bytes, layer});
        }
  };
  const std::vector<EarlyPart> parts = early_parts(m);
  const ParamGroup gr = param_groups(m.options.optimizer).back();  // the group that ends with DEEP_CONV
  const RegionSpan span = group_span(p, gr);
  // as emit_optimizer's and add_late_and_early's early piece of that group, then place_early_parts' parts
  const uint64_t cut = early_cut(m, span), end = early_parts_begin(m, parts) - span.offset;
  if (cut < end) keep(update_nodes(m, gr, cut, end >= span.bytes ? -1 : static_cast<int64_t>(end - cut)), -1);
  for (const EarlyPart& part : parts)
    keep(update_nodes(m, gr, part.lo - span.offset, static_cast<int64_t>(part.hi - part.lo)), part.layer);
  return out;
}

void emit_update(ComputationGraph& g, CompiledModel& m) {
  m.schedule = schedule_params(m.options);
  const std::vector<EarlyPart> parts = early_parts(m);
  if (m.options.precision != DType::F32) {  // G16 -> G before the optimizer, W -> A after it
    const bool scaled = m.options.precision == DType::F16;
    // With an early update the gradients stored after the first layer's are cast at the end of
    // DEEP_FWD_BWD on the side stream (the early parts' before, place_early_parts); the late cast takes the
    // first layer's. fp16 casts with unscale_grads, which unscales and checks them in the same pass
    // (NAN_CHECK_AND_GRAD_SCALING); with update_from_grads16 the updates read G16 and fp16 only checks it.
    const ConvSplit conv = conv_split(m, parts, early_grads_on(m));
    const std::string label =
        scaled ? (m.updates_read_grads16() ? "grad check" : "grad cast and unscale") : "grad cast";
    add_late_and_early(g, scaled ? GraphId::NAN_CHECK_AND_GRAD_SCALING : GraphId::GRAD_CAST, conv.span.bytes,
                       conv.cut, conv.end, [&](uint64_t skip, int64_t take, bool e) {
                         return grad_cast_nodes(m, skip, take, e ? label + " (early)" : label);
                       });
    // The whole cast, for the host's writes (DeepLearningTask::cast_weights) and the step without an early
    // update; with one, each update's cast follows it (emit_optimizer, place_early_parts).
    g.add(GraphId::WEIGHT_CAST, conv_cast_node(m, false, 0, -1, "weight cast"));
    m.weight_cast_in_step = !early_update_on(m) && !fused_cast_on(m);
  }
  if (m.options.precision == DType::F16) {  // the fp32 gradients (batchnorm, fc) back to true scale too
    const RangeRef fp32_grads = RangeRef::regions(param_region(Family::G, ParamKind::BN_BIAS),
                                                  param_region(Family::G, ParamKind::FC_WEIGHT), DType::F32);
    if (m.base_plan().region_range(fp32_grads.first, fp32_grads.last).bytes > 0)
      g.add(GraphId::NAN_CHECK_AND_GRAD_SCALING,
            range_node(FR_OP_UNSCALE_GRADS, {}, {fp32_grads, RangeRef::of(m.t.step_scalars, DType::U8)},
                       "unscale grads"));
  }
  std::vector<RestoreGroup> restores;
  emit_optimizer(g, m, parts, restores);
  place_early_parts(g, m, parts, restores);
  emit_restores(g, m, restores);
  if (m.update_deferred()) mark_update_joins(g, m);
}

}  // namespace fresco::compile_detail
