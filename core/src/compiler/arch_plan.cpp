// Compiler stage 0 (Compiler::derive_arch_plan): the BluePrint flattened into layers in topological order,
// mixed precision's casts, and the fusions the CompileOptions pick (fused relus, batchnorm_add joins, conv
// statistics, conv prologues, gradient sums, join epilogues, the first conv's weight-gradient prologue, the
// fused head). Tests: tests/core/test_compiler*.cpp, test_graph_atlas.cpp and the fusion plan tests.
#include <climits>
#include <cmath>
#include <functional>

#include "compiler/compile_internal.h"
#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco {

using compile_detail::first_param_index;
using compile_detail::fused_join_relu;
using layers::rule_for;

namespace compile_detail {

bool fused_join_relu(const ArchPlan& a, const LayerDescriptor& l) {
  if (l.kind != LayerKind::RELU || l.input < 0 || !rule_for(l.kind).is_view(l, true)) return false;
  const auto& in = a.layers[static_cast<size_t>(l.input)];
  return in.kind == LayerKind::ADD && in.fused_relu;
}

int first_param_index(const ArchPlan& a) {
  for (const auto& l : a.layers)
    if (rule_for(l.kind).has_params()) return l.index;
  return -1;
}

int64_t fc_macs(const CompileOptions& o, const LayerDescriptor& l) {
  return o.batch * l.in_sample.per_sample() * l.out_sample.per_sample();
}

}  // namespace compile_detail

namespace {
const char* kind_prefix(LayerKind k) {
  switch (k) {
    case LayerKind::FC:
      return "fc";
    case LayerKind::RELU:
      return "relu";
    case LayerKind::DROPOUT:
      return "dropout";
    case LayerKind::FLATTEN:
      return "flatten";
    case LayerKind::CUSTOM:
      return "custom";
    case LayerKind::CONV:
      return "conv";
    case LayerKind::BN:
      return "bn";
    case LayerKind::MAXPOOL:
      return "maxpool";
    case LayerKind::AVGPOOL:
      return "avgpool";
    case LayerKind::GAP:
      return "gap";
    case LayerKind::GELU:
      return "gelu";
    case LayerKind::ADD:
      return "add";
    case LayerKind::SILU:
      return "silu";
    case LayerKind::SIGMOID:
      return "sigmoid";
    case LayerKind::TANH:
      return "tanh";
    case LayerKind::CAST:
      return "cast";
    case LayerKind::CONCAT:
      return "concat";
  }
  return "layer";
}

// Mixed precision policy: the dtype a layer computes in, given its input's dtype. Convolutions run in the
// low precision; fc, dropout and custom layers (and the loss after them) in fp32; the rest follow their
// input.
DType wanted_dtype(LayerKind k, DType in, DType precision) {
  switch (k) {
    case LayerKind::CONV:
      return precision;
    case LayerKind::FC:
    case LayerKind::DROPOUT:
    case LayerKind::CUSTOM:
      return DType::F32;
    default:
      return in;
  }
}

// An ON / OFF / AUTO option (conv_stats, grad_sums): ON, or AUTO in mixed precision.
template <class Mode>
bool option_on(Mode mode, const CompileOptions& o) {
  return mode == Mode::ON || (mode == Mode::AUTO && o.precision != DType::F32);
}

// CompileOptions::conv_prologue for conv l: ON, or AUTO in mixed precision on the geometry the CUDA
// backend's own kernels fuse it into.
// The convs the CUDA backend's own Hopper kernels run (ops/conv3x3_wgmma.h): 3x3, stride 1, padding 1, no
// dilation, one group, no bias, 64 -> 64 channels, maps 32 wide.
bool hopper_conv_shape(const LayerDescriptor& l) {
  const LayerSpec& c = l.spec;
  return c.k == 3 && c.stride <= 1 && c.pad == 1 && c.dilation == 1 && c.groups == 1 && !c.bias &&
         l.in_sample.c == 64 && c.out == 64 && l.in_sample.w == 32;
}
bool conv_prologue_on(const CompileOptions& o, const LayerDescriptor& l) {
  using Mode = CompileOptions::ConvPrologue;
  return o.conv_prologue == Mode::ON || (option_on(o.conv_prologue, o) && hopper_conv_shape(l));
}
// CompileOptions::join_epilogue for conv l: ON, or AUTO in mixed precision on the Hopper kernels' shape.
bool join_epilogue_on(const CompileOptions& o, const LayerDescriptor& l) {
  using Mode = CompileOptions::JoinEpilogue;
  return o.join_epilogue == Mode::ON || (option_on(o.join_epilogue, o) && hopper_conv_shape(l));
}
// A narrow input (at most 32 taps, 16 / 32 / 64 outputs, one group, no bias): the CUDA backend's own stem
// kernels (ops/narrow_conv.h).
bool narrow_conv_shape(const LayerDescriptor& l) {
  const LayerSpec& c = l.spec;
  return c.groups == 1 && !c.bias && l.in_sample.c * c.k * c.k <= 32 &&
         (c.out == 16 || c.out == 32 || c.out == 64);
}
// CompileOptions::conv_prologue for the first conv l's weight gradient: ON, or AUTO in mixed precision on a
// narrow input.
bool wgrad_prologue_on(const CompileOptions& o, const LayerDescriptor& l) {
  using Mode = CompileOptions::ConvPrologue;
  return o.conv_prologue == Mode::ON || (option_on(o.conv_prologue, o) && narrow_conv_shape(l));
}
// CompileOptions::conv_stats for conv l: ON, or AUTO in mixed precision where the sums cost the conv no pass
// of its own and add in a fixed order: on the convs fresco's own kernels run (the Hopper stage-1 shape, the
// narrow stem), which add the sums in their epilogue. On a cuDNN convolution the deterministic sums are a
// separate pass and its finalize before the batchnorm's finalize, one launch more than the batchnorm's own
// statistics; cuDNN's fused fp16 statistics accumulate in an order that changes from run to run, so they
// are used only when asked for (ON with FRESCO_CUDNN_GENSTATS; docs/decisions.md).
bool conv_stats_on(const CompileOptions& o, const LayerDescriptor& l) {
  using Mode = CompileOptions::ConvStats;
  if (o.conv_stats == Mode::ON) return true;
  if (!option_on(o.conv_stats, o)) return false;
  return hopper_conv_shape(l) || narrow_conv_shape(l);
}

// A map of `sample` per sample at the larger of the training and evaluation batches fits the sizes the plans
// count in (int64 elements and bytes): at most 2^40 bytes in fp32 (1 TiB, far beyond any device), computed
// without overflow.
void check_map_size(const CompileOptions& o, const Shape& sample, const std::string& what) {
  const int64_t bytes =
      checked_product({4, sample.h, sample.w, sample.c, std::max<int64_t>({o.batch, o.val_batch, 1})});
  const bool overflow = bytes < 0;
  FRESCO_CHECK(!overflow && bytes <= kMaxTensorBytes, ErrorCode::kBadConfig,
               what + ": a map of " + sample.str() + " per sample at batch " +
                   std::to_string(std::max(o.batch, o.val_batch)) + " is " +
                   (overflow ? std::string("beyond 64-bit sizes") : std::to_string(bytes) + " bytes") +
                   "; at most 2^40 bytes per map are supported");
}
}  // namespace

namespace {

// What the fusion passes read of the flattened layers: per layer, how many layers read its output, the first
// that does (-1: none) and all of them in layer order (a join reading one layer twice is there twice), and
// the first layer with parameters.
struct Readers {
  std::vector<int> consumers;
  std::vector<int32_t> first_reader;
  std::vector<std::vector<int32_t>> of;
  int fp = -1;
};

Readers readers_of(const ArchPlan& a) {
  Readers rd;
  rd.consumers.assign(a.layers.size(), 0);
  rd.first_reader.assign(a.layers.size(), -1);
  rd.of.resize(a.layers.size());
  for (const auto& l : a.layers)
    for (const int32_t in : {l.input, l.input2}) {
      if (in < 0) continue;
      ++rd.consumers[static_cast<size_t>(in)];
      if (rd.first_reader[static_cast<size_t>(in)] < 0) rd.first_reader[static_cast<size_t>(in)] = l.index;
      rd.of[static_cast<size_t>(in)].push_back(l.index);
    }
  rd.fp = first_param_index(a);
  return rd;
}

// The options the plan depends on, checked before any layer is read.
void check_options(const BluePrint& bp, const CompileOptions& o) {
  FRESCO_CHECK(!bp.empty(), ErrorCode::kBadConfig, "model: the layer list is empty");
  FRESCO_CHECK(o.input_sample.per_sample() > 0, ErrorCode::kBadConfig,
               "model: input sample shape " + o.input_sample.str() + " is empty");
  check_map_size(o, o.input_sample, "model input");
  FRESCO_CHECK(o.precision == DType::F32 || o.precision == DType::BF16 || o.precision == DType::F16,
               ErrorCode::kBadConfig,
               std::string("precision must be fp32, bf16 or fp16, found ") + dtype_name(o.precision));
  FRESCO_CHECK(o.defer_fc_min_macs >= 0, ErrorCode::kBadConfig,
               "defer_fc_min_macs must be 0 or more, found " + std::to_string(o.defer_fc_min_macs));
  FRESCO_CHECK(o.early_update_min_macs >= 0, ErrorCode::kBadConfig,
               "early_update_min_macs must be 0 or more, found " + std::to_string(o.early_update_min_macs));
  FRESCO_CHECK(o.early_update_parts >= 0 && o.early_update_parts <= 64, ErrorCode::kBadConfig,
               "early_update_parts must be 0 to 64, found " + std::to_string(o.early_update_parts));
  FRESCO_CHECK(o.ema_decay == 0.0f || (o.ema_decay > 0.0f && o.ema_decay < 1.0f), ErrorCode::kBadConfig,
               "ema decay must be in (0, 1) (0: no EMA), found " + std::to_string(o.ema_decay));
  FRESCO_CHECK(o.ema_every >= 1, ErrorCode::kBadConfig,
               "ema every must be 1 or more steps, found " + std::to_string(o.ema_every));
  FRESCO_CHECK(o.conv_join_lag_max >= 0, ErrorCode::kBadConfig,
               "conv_join_lag_max must be 0 (off) or more, found " + std::to_string(o.conv_join_lag_max));
}

ArchPlan flatten_layers(const BluePrint& bp, const CompileOptions& o) {
  ArchPlan a;
  a.input_sample = o.input_sample;
  a.num_classes = o.num_classes;
  // The input map is made in the dtype the first layer computes in (a conv first: the low precision).
  a.input_dtype = !bp.layers().empty() && bp.layers().front().kind == "conv" ? o.precision : DType::F32;
  auto dtype_of = [&](int32_t j) {
    return j < 0 ? a.input_dtype : a.layers[static_cast<size_t>(j)].out_dtype;
  };
  // A cast layer after layer `in` (or the input) to dtype `to`, for the layer at `path`.
  auto add_cast = [&](int32_t in, DType to, const std::string& path) -> int32_t {
    LayerDescriptor c;
    c.index = static_cast<int32_t>(a.layers.size());
    c.kind = LayerKind::CAST;
    c.spec.kind = "cast";
    c.spec.path = path + ":cast";
    c.name = "cast" + std::to_string(c.index);
    c.input = in;
    c.in_sample = c.out_sample = in < 0 ? o.input_sample : a.layers[static_cast<size_t>(in)].out_sample;
    c.out_dtype = to;
    a.layers.push_back(c);
    return c.index;
  };
  // Flatten the (possibly nested) layer list into topological order; a residual block becomes its main
  // branch, its shortcut branch and an ADD join that carries the block's path.
  std::function<int32_t(const LayerSpec&, int32_t, int32_t)> add = [&](const LayerSpec& spec, int32_t in,
                                                                       int32_t in2) -> int32_t {
    const LayerKind kind = spec.kind == "residual" ? LayerKind::ADD
                           : spec.kind == "concat"
                               ? LayerKind::CONCAT
                               : layers::layer_kind_of(spec.kind, "model layer " + spec.path);
    const bool join = kind == LayerKind::ADD || kind == LayerKind::CONCAT;
    const DType want = wanted_dtype(kind, dtype_of(in), o.precision);
    if (want != dtype_of(in)) in = add_cast(in, want, spec.path);
    if (join)
      FRESCO_CHECK(dtype_of(in2) == want, ErrorCode::kBadConfig,
                   "layer " + spec.path + " (" + spec.kind + "): the main branch ends in " +
                       dtype_name(want) + " but the shortcut in " + dtype_name(dtype_of(in2)) +
                       " (mixed precision needs both branches in one precision)");
    LayerDescriptor l;
    l.index = static_cast<int32_t>(a.layers.size());
    l.spec = spec;
    l.kind = kind;
    l.out_dtype = want;
    FRESCO_CHECK(
        kind != LayerKind::BN ||
            (spec.momentum >= 0.0f && spec.momentum <= 1.0f && spec.eps > 0.0f && std::isfinite(spec.eps)),
        ErrorCode::kBadConfig,
        "layer " + spec.path + " (bn): momentum must be in [0, 1] and eps positive, found momentum " +
            std::to_string(spec.momentum) + ", eps " + std::to_string(spec.eps));
    FRESCO_CHECK(!(kind == LayerKind::CONV && spec.bias && o.precision != DType::F32), ErrorCode::kBadConfig,
                 "layer " + spec.path + " (conv): a conv bias is not supported in mixed precision (use bn)");
    l.name =
        (l.kind == LayerKind::CUSTOM ? spec.op : std::string(kind_prefix(l.kind))) + std::to_string(l.index);
    l.input = in;
    l.input2 = in2;
    l.in_sample = in < 0 ? o.input_sample : a.layers[static_cast<size_t>(in)].out_sample;
    l.out_sample = rule_for(l.kind).out_shape(l, l.in_sample);
    if (kind == LayerKind::CONCAT)  // channels of both branches
      l.out_sample.c += (in2 < 0 ? o.input_sample : a.layers[static_cast<size_t>(in2)].out_sample).c;
    check_map_size(o, l.out_sample, "layer " + spec.path + " (" + spec.kind + ")");
    a.layers.push_back(l);
    return l.index;
  };
  std::function<int32_t(const std::vector<LayerSpec>&, int32_t)> chain =
      [&](const std::vector<LayerSpec>& list, int32_t cur) -> int32_t {
    for (const LayerSpec& spec : list) {
      if (spec.kind != "residual" && spec.kind != "concat") {
        cur = add(spec, cur, -1);
        continue;
      }
      const int32_t main_out = chain(spec.main, cur);
      const int32_t short_out = chain(spec.shortcut, cur);  // identity when empty: the block input itself
      const Shape ms = a.layers[static_cast<size_t>(main_out)].out_sample;
      const Shape ss = short_out < 0 ? o.input_sample : a.layers[static_cast<size_t>(short_out)].out_sample;
      if (spec.kind == "concat")
        FRESCO_CHECK(ms.h == ss.h && ms.w == ss.w, ErrorCode::kBadConfig,
                     "layer " + spec.path + " (concat): the main branch gives " + ms.str() +
                         " per sample but the " +
                         (spec.shortcut.empty() ? "identity branch" : "second branch") + " gives " +
                         ss.str() + " (concat needs the same height and width)");
      else
        FRESCO_CHECK(ms == ss, ErrorCode::kBadConfig,
                     "layer " + spec.path + " (residual): the main branch gives " + ms.str() +
                         " per sample but the " + (spec.shortcut.empty() ? "identity shortcut" : "shortcut") +
                         " gives " + ss.str() +
                         (spec.shortcut.empty() ? " (add a projection shortcut)" : ""));
      cur = add(spec, main_out, short_out);
    }
    return cur;
  };
  chain(bp.layers(), -1);
  return a;
}

// The first layer with parameters: there is one, and CompileOptions::freeze_first_layer can freeze it.
void check_first_layer(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const int fp = rd.fp;
  FRESCO_CHECK(fp >= 0, ErrorCode::kBadConfig, "model: no trainable layer (add an fc)");
  a.layers[static_cast<size_t>(fp)].first_param_layer = true;
  const LayerDescriptor& first = a.layers[static_cast<size_t>(fp)];
  FRESCO_CHECK(!o.freeze_first_layer || (first.kind == LayerKind::CONV && !first.spec.bias),
               ErrorCode::kBadConfig,
               "freeze_first_layer: the first layer with parameters must be a bias-free conv (its weight has "
               "a region of its own), found " +
                   std::string(kind_prefix(first.kind)) + (first.spec.bias ? " with a bias" : "") +
                   " (layer " + first.spec.path + ")");
  bool more = false;
  for (size_t i = static_cast<size_t>(fp) + 1; i < a.layers.size(); ++i)
    more = more || rule_for(a.layers[i].kind).has_params();
  FRESCO_CHECK(!o.freeze_first_layer || more, ErrorCode::kBadConfig,
               "freeze_first_layer: no layer after the first has parameters to train");
}

void fuse_relus(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  // Whether the gradient arriving at layer r's output is also another branch's: r's only reader is a residual
  // join (whose branches share one gradient), directly or through flatten views. With two readers the
  // gradient is their sum, a tensor of its own.
  auto gradient_shared = [&](size_t r) {
    for (size_t j = r + 1; consumers[r] == 1 && j < a.layers.size(); ++j) {
      const auto& c = a.layers[j];
      if (c.input != static_cast<int32_t>(r) && c.input2 != static_cast<int32_t>(r)) continue;
      if (c.kind != LayerKind::FLATTEN) return c.kind == LayerKind::ADD;
      r = j;  // a flatten view passes the gradient through: follow its reader
    }
    return false;
  };
  // A relu right after an fc, a batchnorm or a residual join that nothing else reads is computed by that
  // layer (relu epilogue / fused kernel; its backward masks the gradient with the relu's output). The fc's
  // backward masks its incoming gradient in place, so an fc is not fused when that gradient is shared.
  if (o.fuse_activations)
    for (size_t i = 0; i + 1 < a.layers.size(); ++i) {
      const LayerKind k = a.layers[i].kind;
      if ((k == LayerKind::FC || k == LayerKind::BN || k == LayerKind::ADD) &&
          a.layers[i + 1].kind == LayerKind::RELU && a.layers[i + 1].input == static_cast<int32_t>(i) &&
          consumers[i] == 1 && !(k == LayerKind::FC && gradient_shared(i + 1))) {
        a.layers[i].fused_relu = true;
        a.layers[i + 1].fused_into_prev = true;
      }
    }
}

void fuse_joins(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  // A batchnorm that only a residual join reads is computed by that join in training (batchnorm_add); of a
  // join of two batchnorms (a projection shortcut), the main branch's.
  if (o.fuse_joins)
    for (auto& l : a.layers) {
      if (l.kind != LayerKind::ADD || l.input == l.input2) continue;
      for (const int32_t b : {l.input, l.input2}) {
        if (b < 0) continue;
        auto& bn = a.layers[static_cast<size_t>(b)];
        if (bn.kind != LayerKind::BN || bn.fused_relu || consumers[static_cast<size_t>(b)] != 1) continue;
        bn.fused_into_join = true;
        l.join_bn = b;
        break;
      }
    }
}

void plan_conv_stats(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  // A training batchnorm reading a bias-free conv that nothing else reads takes its statistics from sums the
  // conv writes (CompileOptions::conv_stats).
  for (auto& l : a.layers) {
    if (l.kind != LayerKind::BN || l.input < 0) continue;
    auto& conv = a.layers[static_cast<size_t>(l.input)];
    if (conv.kind != LayerKind::CONV || conv.spec.bias || consumers[static_cast<size_t>(l.input)] != 1 ||
        !conv_stats_on(o, conv))
      continue;
    conv.writes_sums = true;
    l.reads_sums = true;
  }
}

// Whether, with CompileOptions::fork_shortcuts, another layer than a join reads conv l's input: that reader
// may head a forked branch (a projection shortcut), which the forward emits on the side stream before the
// main branch's first layer, so it would read a map that a prologue conv l has not written yet.
bool read_by_a_forked_branch(const ArchPlan& a, const CompileOptions& o, const Readers& rd,
                             const LayerDescriptor& l) {
  if (!o.fork_shortcuts) return false;
  for (const int32_t r : rd.of[static_cast<size_t>(l.input)]) {
    const LayerKind k = a.layers[static_cast<size_t>(r)].kind;
    if (r != l.index && k != LayerKind::ADD && k != LayerKind::CONCAT) return true;
  }
  return false;
}

void plan_conv_prologues(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int32_t>& first_reader = rd.first_reader;
  const int fp = rd.fp;
  // CompileOptions::conv_prologue: a conv that is the first reader of a batchnorm's fused relu (the other
  // reader, if any, comes later: a residual join's shortcut) applies that batchnorm itself and writes its
  // map.
  for (auto& l : a.layers) {
    if (l.kind != LayerKind::CONV || l.input <= fp) continue;
    const auto& relu = a.layers[static_cast<size_t>(l.input)];
    if (relu.kind != LayerKind::RELU || !relu.fused_into_prev ||
        first_reader[static_cast<size_t>(l.input)] != l.index)
      continue;
    auto& bn = a.layers[static_cast<size_t>(relu.input)];
    if (bn.kind != LayerKind::BN || !bn.fused_relu || bn.fused_into_join || relu.input <= fp ||
        !conv_prologue_on(o, l) || read_by_a_forked_branch(a, o, rd, l))
      continue;
    bn.applied_by_conv = true;
    l.prologue_bn = relu.input;
  }
}

void plan_join_prologues(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  // CompileOptions::join_prologue (ON only: AUTO is off until timed on a GPU): a conv that is the first
  // reader of a batchnorm_add join's relu (the next join reads it later as its shortcut) applies the join's
  // batchnorm, add and relu itself and writes the join's map; the join computes the statistics only.
  if (o.join_prologue != CompileOptions::JoinPrologue::ON) return;
  for (auto& l : a.layers) {
    if (l.kind != LayerKind::CONV || l.input <= rd.fp || l.prologue_bn >= 0) continue;
    const auto& relu = a.layers[static_cast<size_t>(l.input)];
    if (relu.kind != LayerKind::RELU || !relu.fused_into_prev || relu.input <= rd.fp ||
        rd.first_reader[static_cast<size_t>(l.input)] != l.index)
      continue;
    auto& join = a.layers[static_cast<size_t>(relu.input)];
    if (join.kind != LayerKind::ADD || !join.fused_relu || join.join_bn < 0 || join.applied_by_conv ||
        !conv_prologue_on(o, l) || read_by_a_forked_branch(a, o, rd, l))
      continue;
    join.applied_by_conv = true;
    l.prologue_bn = join.join_bn;
    l.prologue_join = join.index;
  }
}

void plan_grad_sums(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  const int fp = rd.fp;
  // CompileOptions::grad_sums: the masking pass that writes a batchnorm's output gradient writes its two
  // gradient sums too. That pass is a fused join's relu backward (for the batchnorm on either branch that
  // only the join reads), or, at a relu fused into a batchnorm whose output two layers read, the sum of the
  // two gradient parts, which then also applies the relu's mask (the batchnorm's backward gets it premasked).
  if (option_on(o.grad_sums, o))
    for (auto& l : a.layers) {
      int32_t b = -1;
      if (l.kind == LayerKind::CONV && l.prologue_bn >= 0 && l.prologue_join < 0 &&
          consumers[static_cast<size_t>(l.input)] == 1) {
        // the conv that applies a batchnorm only it reads: its input gradient is that batchnorm's masked
        // output gradient, written with the two sums (conv2d_backward's batchnorm gradient epilogue)
        l.grad_sums_bn = l.prologue_bn;
        a.layers[static_cast<size_t>(l.prologue_bn)].grad_premasked = true;
        continue;
      }
      if (l.kind == LayerKind::ADD && l.fused_relu && l.input != l.input2) {
        for (const int32_t in : {l.input, l.input2}) {
          if (in <= fp) continue;
          const auto& bn = a.layers[static_cast<size_t>(in)];
          if (bn.kind != LayerKind::BN || bn.fused_relu || consumers[static_cast<size_t>(in)] != 1) continue;
          (b < 0 ? b : l.grad_sums_bn2) = in;
        }
      } else if (l.kind == LayerKind::RELU && l.fused_into_prev && l.input > fp &&
                 consumers[static_cast<size_t>(l.index)] == 2) {
        const auto& bn = a.layers[static_cast<size_t>(l.input)];
        if (bn.kind == LayerKind::BN && bn.fused_relu) b = l.input;
      }
      if (b < 0) continue;
      l.grad_sums_bn = b;
      auto& bn = a.layers[static_cast<size_t>(b)];
      if (bn.fused_relu) bn.grad_premasked = true;
    }
}

void plan_join_epilogues(ArchPlan& a, const CompileOptions& o, const Readers& readers) {
  // CompileOptions::join_epilogue: a masking pass with one batchnorm's gradient sums at a relu whose output
  // a conv and a later layer read (so the later one's gradient part is written first) goes into that conv's
  // input gradient.
  FRESCO_CHECK(o.join_epilogue != CompileOptions::JoinEpilogue::ON || option_on(o.grad_sums, o),
               ErrorCode::kBadConfig,
               "join_epilogue ON folds the masking passes that write a batchnorm's gradient sums, which "
               "grad_sums is off for here: set grad_sums ON too (or join_epilogue AUTO / OFF)");
  if (option_on(o.grad_sums, o)) {
    for (auto& m : a.layers) {
      if (m.grad_sums_bn < 0 || m.grad_sums_bn2 >= 0) continue;
      int32_t relu = -1;  // the layer whose output the two readers read
      if (m.kind == LayerKind::ADD && m.fused_relu) {
        for (const int32_t r : readers.of[static_cast<size_t>(m.index)])
          if (fused_join_relu(a, a.layers[static_cast<size_t>(r)])) relu = r;
      } else if (m.kind == LayerKind::RELU) {
        relu = m.index;
      }
      if (relu < 0) continue;
      const auto& rd = readers.of[static_cast<size_t>(relu)];
      if (rd.size() != 2 || rd[0] == rd[1]) continue;
      auto& conv = a.layers[static_cast<size_t>(std::min(rd[0], rd[1]))];
      if (conv.kind != LayerKind::CONV || conv.input != relu || conv.grad_sums_bn >= 0 ||
          !join_epilogue_on(o, conv))
        continue;
      conv.join_epilogue_of = m.index;
      m.join_grad_by_conv = conv.index;
    }
  }
}

// A conv whose input gradient may be written compact (ops.h): 1x1, padding 0, stride above 1 (its output
// positions are then fewer than its input's), dilation 1, one group.
bool compact_dx_shape(const LayerDescriptor& l) {
  const LayerSpec& c = l.spec;
  return l.kind == LayerKind::CONV && c.k == 1 && c.pad == 0 && c.stride > 1 && c.dilation == 1 &&
         c.groups == 1;
}

// CompileOptions::subsampled_shortcuts for shortcut conv c: ON, or AUTO in bf16 where c is a small GEMM (at
// most 2^34 multiply-adds at the step's batch), bandwidth-bound, which cuDNN's strided kernels run slowly
// (ResNet-18 b512's three, 1.1e9 each, on three H100s: 40-61 us a step faster for 28 MiB more; fp16 gains 42
// us but its 1342 MiB would pass the 1321 of PyTorch's best mode on the H200; ResNet-50
// b256's, 2.6e10 each, ran 0.2 ms slower with 171 MiB more: docs/decisions.md).
bool subsampled_shortcut_on(const CompileOptions& o, const LayerDescriptor& c) {
  using Mode = CompileOptions::SubsampledShortcuts;
  const int64_t macs = o.batch * c.out_sample.per_sample() * c.in_sample.c;
  return o.subsampled_shortcuts == Mode::ON ||
         (o.subsampled_shortcuts == Mode::AUTO && o.precision == DType::BF16 && macs <= (int64_t{1} << 34));
}

void plan_compact_grads(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  // CompileOptions::compact_shortcut_grads: at a relu whose output two layers read and whose two gradient
  // parts add_relu_backward sums (a fused join's relu, or one fused into a batchnorm with gradient sums; not
  // a pass a conv's join epilogue does), a reader that is a strided 1x1 conv writes its part compact.
  using Compact = CompileOptions::CompactShortcutGrads;
  FRESCO_CHECK(
      o.compact_shortcut_grads != Compact::ON || o.overlap_weight_gradients, ErrorCode::kBadConfig,
      "compact_shortcut_grads ON writes a shortcut's input gradient as a node of its own, which needs "
      "overlap_weight_gradients (or compact_shortcut_grads AUTO / OFF)");
  FRESCO_CHECK(o.subsampled_shortcuts != CompileOptions::SubsampledShortcuts::ON ||
                   option_on(o.compact_shortcut_grads, o),
               ErrorCode::kBadConfig,
               "subsampled_shortcuts ON makes the shortcut's input gradient the compact part, which "
               "compact_shortcut_grads is off for here: set it ON too (or subsampled_shortcuts AUTO / OFF)");
  if (!option_on(o.compact_shortcut_grads, o) || !o.overlap_weight_gradients) return;
  for (const auto& r : a.layers) {
    const auto& rdr = rd.of[static_cast<size_t>(r.index)];
    if (rdr.size() != 2 || rdr[0] == rdr[1] || r.index <= rd.fp) continue;
    int32_t masking = -1;  // the layer whose backward is the add_relu_backward of the two parts
    if (fused_join_relu(a, r))
      masking = r.input;
    else if (r.kind == LayerKind::RELU && r.grad_sums_bn >= 0)
      masking = r.index;
    if (masking < 0) continue;
    auto& m = a.layers[static_cast<size_t>(masking)];
    if (m.join_grad_by_conv >= 0 || m.compact_part_stride > 0) continue;
    for (const int32_t c : {rdr[1], rdr[0]}) {
      auto& conv = a.layers[static_cast<size_t>(c)];
      if (!compact_dx_shape(conv) || conv.input != r.index) continue;
      conv.compact_dx = true;
      m.compact_part_stride = static_cast<int32_t>(conv.spec.stride);
      // CompileOptions::subsampled_shortcuts: a stride-2 one reading a batchnorm_add join's relu reads the
      // join's subsampled output instead, at stride 1
      if (subsampled_shortcut_on(o, conv) && conv.spec.stride == 2 && fused_join_relu(a, r) &&
          m.kind == LayerKind::ADD && m.join_bn >= 0 && !m.writes_subsample && !m.applied_by_conv) {
        conv.reads_subsample = true;
        m.writes_subsample = true;
      }
      break;
    }
  }
}

void plan_wgrad_prologue(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  const std::vector<int32_t>& first_reader = rd.first_reader;
  const int fp = rd.fp;
  // The first conv's weight gradient applies the backward of the batchnorm that alone reads its output when
  // that batchnorm gets its gradient premasked with its sums (above): its dx is read by nothing else. A
  // frozen first conv has no weight gradient, so that batchnorm's dx is not computed at all (its weights-only
  // form).
  {
    auto& conv = a.layers[static_cast<size_t>(fp)];
    const int32_t b = first_reader[static_cast<size_t>(fp)];
    if (conv.kind == LayerKind::CONV && b >= 0 && consumers[static_cast<size_t>(fp)] == 1 &&
        option_on(o.grad_sums, o) && (wgrad_prologue_on(o, conv) || o.freeze_first_layer)) {
      auto& bn = a.layers[static_cast<size_t>(b)];
      bool has_sums = false;
      for (const auto& l : a.layers) has_sums = has_sums || l.grad_sums_bn == b || l.grad_sums_bn2 == b;
      if (bn.kind == LayerKind::BN && bn.grad_premasked && has_sums && !bn.fused_into_join) {
        bn.dx_by_conv = true;
        if (!o.freeze_first_layer) conv.wgrad_prologue_bn = b;
      }
    }
  }
}

// The last layer gives one value per class; each weight fits the plans' sizes; the parameters counted.
void check_output_and_count_parameters(ArchPlan& a, const CompileOptions& o) {
  const Shape cur = a.layers.back().out_sample;
  FRESCO_CHECK(cur.h == 1 && cur.w == 1 && cur.c == o.num_classes, ErrorCode::kBadConfig,
               "model: the last layer outputs " + cur.str() + " per sample, but the data has " +
                   std::to_string(o.num_classes) + " classes (expected [1,1,1," +
                   std::to_string(o.num_classes) + "]; make the last fc's out " +
                   std::to_string(o.num_classes) + ")");
  for (const auto& l : a.layers) {
    // weights: out x the values per output, checked before they are multiplied (a 2^40-byte tensor is
    // refused here, not only when the memory plan adds it)
    if (l.kind == LayerKind::FC || l.kind == LayerKind::CONV) {
      const int64_t weights =
          l.kind == LayerKind::FC
              ? checked_product({l.spec.out, l.in_sample.h, l.in_sample.w, l.in_sample.c})
              : checked_product({l.spec.out, l.spec.k, l.spec.k, l.in_sample.c / l.spec.groups});
      FRESCO_CHECK(weights >= 0 && weights <= kMaxTensorBytes / 8, ErrorCode::kBadConfig,
                   "layer " + l.spec.path + " (" + l.spec.kind + "): a weight of " +
                       std::to_string(l.spec.out) + " outputs is too large (at most 2^40 bytes per tensor)");
      a.parameter_count += weights + (l.spec.bias ? l.spec.out : 0);
    }
    if (l.kind == LayerKind::BN) a.parameter_count += 2 * l.in_sample.c;
  }
}

void plan_fused_head(ArchPlan& a, const CompileOptions& o, const Readers& rd) {
  const std::vector<int>& consumers = rd.consumers;
  const int fp = rd.fp;
  // CompileOptions::fuse_head: the last fc, with the previous fc's fused relu mask when that fc feeds it.
  auto& head = a.layers.back();
  if (o.fuse_head && head.kind == LayerKind::FC && !head.fused_relu && head.index != fp &&
      head.out_dtype == DType::F32 && head.out_sample.per_sample() <= FR_FC_SOFTMAX_XENT_MAX_CLASSES) {
    a.fused_head = true;
    // (each layer on the way read by the next one only, so the head's input gradient is all their gradient)
    int32_t j = head.input;
    bool single = j >= 0 && consumers[static_cast<size_t>(j)] == 1;
    while (single && a.layers[static_cast<size_t>(j)].fused_into_prev) {
      j = a.layers[static_cast<size_t>(j)].input;
      single = j >= 0 && consumers[static_cast<size_t>(j)] == 1;
    }
    if (single && a.layers[static_cast<size_t>(j)].kind == LayerKind::FC &&
        a.layers[static_cast<size_t>(j)].fused_relu) {
      a.layers[static_cast<size_t>(j)].grad_premasked = true;
      a.fused_head_masks_input = true;
    }
  }
}

}  // namespace

ArchPlan Compiler::arch_at(const ArchPlan& a, const Shape& sample) {
  if (sample == a.input_sample) return a;
  ArchPlan r = a;
  r.input_sample = sample;
  const std::string at = " at the input size " + sample.str() + " (progressive resolution)";
  auto sample_of = [&](int32_t j) { return j < 0 ? sample : r.layers[static_cast<size_t>(j)].out_sample; };
  for (LayerDescriptor& l : r.layers) {
    const LayerDescriptor& base = a.layers[static_cast<size_t>(l.index)];
    const std::string where = "layer " + l.spec.path + " (" + l.spec.kind + ")";
    l.in_sample = sample_of(l.input);
    try {
      l.out_sample = rule_for(l.kind).out_shape(l, l.in_sample);
    } catch (const Error& e) {
      throw Error(e.code(), std::string(e.what()) + at);
    }
    if (l.kind == LayerKind::CONCAT) {
      const Shape s2 = sample_of(l.input2);
      FRESCO_CHECK(s2.h == l.in_sample.h && s2.w == l.in_sample.w, ErrorCode::kBadConfig,
                   where + ": the branches give " + l.in_sample.str() + " and " + s2.str() + at);
      l.out_sample.c += s2.c;
    }
    if (l.kind == LayerKind::ADD)
      FRESCO_CHECK(sample_of(l.input2) == l.in_sample, ErrorCode::kBadConfig,
                   where + ": the main branch gives " + l.in_sample.str() + " per sample but the shortcut " +
                       sample_of(l.input2).str() + at);
    // What the plan allocates once for every variant: parameters (an fc's input size), views, channels (a
    // flatten's change with the size; the fc reading them is refused).
    FRESCO_CHECK(l.kind != LayerKind::FC || l.in_sample.per_sample() == base.in_sample.per_sample(),
                 ErrorCode::kBadConfig,
                 where + ": reads " + std::to_string(l.in_sample.per_sample()) + " values per sample" + at +
                     " but " + std::to_string(base.in_sample.per_sample()) + " at " + a.input_sample.str() +
                     ", so its weights would change; end the features with a global average pool");
    FRESCO_CHECK(rule_for(l.kind).is_view(l, true) == rule_for(l.kind).is_view(base, true) &&
                     rule_for(l.kind).is_view(l, false) == rule_for(l.kind).is_view(base, false) &&
                     (l.kind == LayerKind::FLATTEN || l.out_sample.c == base.out_sample.c),
                 ErrorCode::kBadConfig,
                 where + ": computes another way" + at + " than at " + a.input_sample.str() +
                     " (a flatten of a map that is 1x1 at one size only)");
  }
  return r;
}

// Stage 0: the layers in topological order, then each fusion the options pick, in an order where each reads
// only what the ones before decided.
ArchPlan Compiler::derive_arch_plan(const BluePrint& bp, const CompileOptions& o) {
  check_options(bp, o);
  ArchPlan a = flatten_layers(bp, o);
  const Readers rd = readers_of(a);
  check_first_layer(a, o, rd);
  fuse_relus(a, o, rd);
  fuse_joins(a, o, rd);
  plan_conv_stats(a, o, rd);
  plan_conv_prologues(a, o, rd);
  plan_join_prologues(a, o, rd);
  plan_grad_sums(a, o, rd);
  plan_join_epilogues(a, o, rd);
  plan_compact_grads(a, o, rd);
  plan_wgrad_prologue(a, o, rd);
  check_output_and_count_parameters(a, o);
  plan_fused_head(a, o, rd);
  return a;
}

}  // namespace fresco
