// Compiler: the five stages from a BluePrint to memory plans, zero-shape graphs and the GraphAtlas.
#include "fresco/core/compiler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>

#include "fresco/core/error.h"
#include "fresco/ops.h"
#include "layers/layer_rule.h"

namespace fresco {

using layers::batchnorm_add_node;
using layers::compute_node;
using layers::EmitContext;
using layers::fc_weight_gradient_node;
using layers::rule_for;

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

// The relu fused into the residual join it follows (a view of the join's output).
bool fused_join_relu(const ArchPlan& a, const LayerDescriptor& l) {
  if (l.kind != LayerKind::RELU || l.input < 0 || !rule_for(l.kind).is_view(l, true)) return false;
  const auto& in = a.layers[static_cast<size_t>(l.input)];
  return in.kind == LayerKind::ADD && in.fused_relu;
}

int first_param_index(const ArchPlan& a);

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
// of its own: in fp16 everywhere (cuDNN's fused statistics), in bf16 on the convs fresco's own kernels run
// (the Hopper stage-1 shape, the narrow stem), which add the sums in their epilogue. cuDNN has no fast bf16
// statistics, so there a separate sums pass and its finalize would precede the batchnorm's finalize: one
// launch more than the batchnorm's own statistics (docs/decisions.md).
bool conv_stats_on(const CompileOptions& o, const LayerDescriptor& l) {
  using Mode = CompileOptions::ConvStats;
  if (o.conv_stats == Mode::ON) return true;
  if (!option_on(o.conv_stats, o)) return false;
  return o.precision != DType::BF16 || hopper_conv_shape(l) || narrow_conv_shape(l);
}
void emit_input(EmitContext& cx, const CompiledModel& m, char ab);
void emit_forward(EmitContext& cx, const CompiledModel& m, int i);
void emit_backward(EmitContext& cx, const CompiledModel& m, int i, TensorId dx);
void emit_loss(EmitContext& cx, const CompiledModel& m, bool training);

int first_param_index(const ArchPlan& a) {
  for (const auto& l : a.layers)
    if (rule_for(l.kind).has_params()) return l.index;
  return -1;
}

// Multiply-adds of fc layer l's forward (and of each of its gradients) at the training batch.
int64_t fc_macs(const CompileOptions& o, const LayerDescriptor& l) {
  return o.batch * l.in_sample.per_sample() * l.out_sample.per_sample();
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

// Layer i is the head that CompileOptions::fuse_head runs as one fc_softmax_xent node in training.
bool is_fused_head(const CompiledModel& m, int i) {
  return m.arch.fused_head && i + 1 == static_cast<int>(m.arch.layers.size());
}
}  // namespace

ArchPlan Compiler::derive_arch_plan(const BluePrint& bp, const CompileOptions& o) {
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
  FRESCO_CHECK(o.conv_join_lag_max >= 0, ErrorCode::kBadConfig,
               "conv_join_lag_max must be 0 (off) or more, found " + std::to_string(o.conv_join_lag_max));
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
  const Shape cur = a.layers.back().out_sample;
  std::vector<int> consumers(a.layers.size(), 0);
  for (const auto& l : a.layers) {
    if (l.input >= 0) ++consumers[static_cast<size_t>(l.input)];
    if (l.input2 >= 0) ++consumers[static_cast<size_t>(l.input2)];
  }
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
  const int fp = first_param_index(a);
  FRESCO_CHECK(fp >= 0, ErrorCode::kBadConfig, "model: no trainable layer (add an fc)");
  a.layers[static_cast<size_t>(fp)].first_param_layer = true;
  {
    const LayerDescriptor& first = a.layers[static_cast<size_t>(fp)];
    FRESCO_CHECK(
        !o.freeze_first_layer || (first.kind == LayerKind::CONV && !first.spec.bias), ErrorCode::kBadConfig,
        "freeze_first_layer: the first layer with parameters must be a bias-free conv (its weight has "
        "a region of its own), found " +
            std::string(kind_prefix(first.kind)) + (first.spec.bias ? " with a bias" : "") + " (layer " +
            first.spec.path + ")");
    bool more = false;
    for (size_t i = static_cast<size_t>(fp) + 1; i < a.layers.size(); ++i)
      more = more || rule_for(a.layers[i].kind).has_params();
    FRESCO_CHECK(!o.freeze_first_layer || more, ErrorCode::kBadConfig,
                 "freeze_first_layer: no layer after the first has parameters to train");
  }
  // CompileOptions::conv_prologue: a conv that is the first reader of a batchnorm's fused relu (the other
  // reader, if any, comes later: a residual join's shortcut) applies that batchnorm itself and writes its
  // map.
  std::vector<int32_t> first_reader(a.layers.size(), -1);
  for (const auto& l : a.layers)
    for (const int32_t in : {l.input, l.input2})
      if (in >= 0 && first_reader[static_cast<size_t>(in)] < 0)
        first_reader[static_cast<size_t>(in)] = l.index;
  for (auto& l : a.layers) {
    if (l.kind != LayerKind::CONV || l.input <= fp) continue;
    const auto& relu = a.layers[static_cast<size_t>(l.input)];
    if (relu.kind != LayerKind::RELU || !relu.fused_into_prev ||
        first_reader[static_cast<size_t>(l.input)] != l.index)
      continue;
    auto& bn = a.layers[static_cast<size_t>(relu.input)];
    if (bn.kind != LayerKind::BN || !bn.fused_relu || bn.fused_into_join || relu.input <= fp ||
        !conv_prologue_on(o, l))
      continue;
    bn.applied_by_conv = true;
    l.prologue_bn = relu.input;
  }
  // CompileOptions::grad_sums: the masking pass that writes a batchnorm's output gradient writes its two
  // gradient sums too. That pass is a fused join's relu backward (for the batchnorm on either branch that
  // only the join reads), or, at a relu fused into a batchnorm whose output two layers read, the sum of the
  // two gradient parts, which then also applies the relu's mask (the batchnorm's backward gets it premasked).
  if (option_on(o.grad_sums, o))
    for (auto& l : a.layers) {
      int32_t b = -1;
      if (l.kind == LayerKind::CONV && l.prologue_bn >= 0 && consumers[static_cast<size_t>(l.input)] == 1) {
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
  // CompileOptions::join_epilogue: a masking pass with one batchnorm's gradient sums at a relu whose output
  // a conv and a later layer read (so the later one's gradient part is written first) goes into that conv's
  // input gradient.
  FRESCO_CHECK(o.join_epilogue != CompileOptions::JoinEpilogue::ON || option_on(o.grad_sums, o),
               ErrorCode::kBadConfig,
               "join_epilogue ON folds the masking passes that write a batchnorm's gradient sums, which "
               "grad_sums is off for here: set grad_sums ON too (or join_epilogue AUTO / OFF)");
  if (option_on(o.grad_sums, o)) {
    std::vector<std::vector<int32_t>> readers(a.layers.size());
    for (const auto& l : a.layers)
      for (const int32_t in : {l.input, l.input2})
        if (in >= 0) readers[static_cast<size_t>(in)].push_back(l.index);
    for (auto& m : a.layers) {
      if (m.grad_sums_bn < 0 || m.grad_sums_bn2 >= 0) continue;
      int32_t relu = -1;  // the layer whose output the two readers read
      if (m.kind == LayerKind::ADD && m.fused_relu) {
        for (const int32_t r : readers[static_cast<size_t>(m.index)])
          if (fused_join_relu(a, a.layers[static_cast<size_t>(r)])) relu = r;
      } else if (m.kind == LayerKind::RELU) {
        relu = m.index;
      }
      if (relu < 0) continue;
      const auto& rd = readers[static_cast<size_t>(relu)];
      if (rd.size() != 2 || rd[0] == rd[1]) continue;
      auto& conv = a.layers[static_cast<size_t>(std::min(rd[0], rd[1]))];
      if (conv.kind != LayerKind::CONV || conv.input != relu || conv.grad_sums_bn >= 0 ||
          !join_epilogue_on(o, conv))
        continue;
      conv.join_epilogue_of = m.index;
      m.join_grad_by_conv = conv.index;
    }
  }
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
  return a;
}

// Stage 1: batch (and so every activation shape) of each of the six variants.
void Compiler::derive_all_shapes(CompiledModel& m) {
  const CompileOptions& o = m.options;
  FRESCO_CHECK(o.batch > 0, ErrorCode::kBadConfig,
               "batch_size must be positive, found " + std::to_string(o.batch));
  FRESCO_CHECK(o.train_samples > 0, ErrorCode::kBadConfig, "training set is empty");
  const int64_t vb = o.val_batch > 0 ? o.val_batch : o.batch;
  const int64_t train_batch = std::min(o.batch, o.train_samples);
  m.batch_of.fill(0);
  m.batch_of[static_cast<int>(Variant::TRAIN_BASE)] = train_batch;
  m.batch_of[static_cast<int>(Variant::TRAIN_LOWRES)] = train_batch;  // one resolution stage: same as base
  const int64_t last = o.train_samples % train_batch;
  if (last) {
    m.batch_of[static_cast<int>(Variant::TRAIN_LAST)] = last;
    m.batch_of[static_cast<int>(Variant::TRAIN_LOWRES_LAST)] = last;
  }
  if (o.val_samples > 0) {
    const int64_t val_batch = std::min(vb, o.val_samples);
    m.batch_of[static_cast<int>(Variant::VAL_BASE)] = val_batch;
    if (o.val_samples % val_batch)
      m.batch_of[static_cast<int>(Variant::VAL_LAST)] = o.val_samples % val_batch;
  }
  // Training batchnorm needs more than one value per channel (PyTorch refuses it too): a batch of one sample
  // on a 1x1 map, the last partial batch included, is refused here rather than by the kernel mid-run.
  const int64_t smallest = last ? last : train_batch;
  for (const auto& l : m.arch.layers)
    FRESCO_CHECK(l.kind != LayerKind::BN || smallest * l.in_sample.h * l.in_sample.w >= 2,
                 ErrorCode::kBadConfig,
                 "layer " + l.spec.path + " (bn): training needs more than one value per channel, but the " +
                     (last ? "last batch (" + std::to_string(o.train_samples) + " samples in batches of " +
                                 std::to_string(train_batch) + ")"
                           : std::string("batch")) +
                     " has " + std::to_string(smallest) + " sample on a " + std::to_string(l.in_sample.h) +
                     "x" + std::to_string(l.in_sample.w) + " map; choose another batch size");
}

// Stage 2 is folded into allocation: every batched tensor is allocated at the largest batch of any variant,
// so its slot is the maximum over variants; this records that batch.
void Compiler::compute_max_slot_bytes(CompiledModel& m) {
  int64_t max_batch = 0;
  for (int64_t b : m.batch_of) max_batch = std::max(max_batch, b);
  m.options.val_batch = max_batch;  // remembered for create_memory_plans
}

static void fit_feature_lifetimes(CompiledModel& m, MemoryPlan& p);

void Compiler::create_memory_plans(CompiledModel& m) {
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
  for (Family f : {Family::G, Family::M, Family::V}) {
    if (f == Family::M && !opt.uses_m()) continue;
    if (f == Family::V && !opt.uses_v()) continue;
    for (auto& l : a.layers) {
      for (TensorId w : {l.weight, l.bias}) {
        if (w == kNoTensor) continue;
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
  for (auto& l : a.layers)  // the batchnorm a conv applies and its input map (CompileOptions::conv_prologue)
    if (l.prologue_bn >= 0) {
      const auto& bn = a.layers[static_cast<size_t>(l.prologue_bn)];
      l.prologue = {bn.weight, bn.bias, bn.save_mean, bn.save_invstd};
      l.prologue_input = input_tensor(bn.input);
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
      l.grad_in = batched(p.alloc_feature(read_sample(a, l).with_batch(mb), "grad(" + l.name + ".in)",
                                          l.index, 2 * L + 1 - l.index, end, dtype_of(l.input)));
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
  const auto& sched = m.options.scheduler;
  t.lr_table =
      p.alloc_lr_table(sched.type == Scheduler::Type::TABLE ? static_cast<int64_t>(sched.table.size()) : 1);
  t.batch_train = p.alloc_result(sizeof(FrBatchResults), "batch_results.train");
  t.batch_val = p.alloc_result(sizeof(FrBatchResults), "batch_results.val");
  t.acc_train = p.alloc_result(sizeof(FrMetricAccumulators), "metrics.train");
  t.acc_val = p.alloc_result(sizeof(FrMetricAccumulators), "metrics.val");
  fit_feature_lifetimes(m, p);
  p.finalize();
  // One plan per present variant: same offsets, shapes at that variant's batch.
  for (int v = 0; v < kVariantCount; ++v) {
    const int64_t b = m.batch_of[v];
    if (b == 0) continue;
    MemoryPlan vp = p;
    for (const DTensor& d : p.tensors())
      if (d.batched) vp.mutable_tensor(d.id).shape.n = b;
    m.plans[v] = std::make_unique<MemoryPlan>(std::move(vp));
  }
}

namespace {
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

// The map layer j writes (-1: the normalised network input).
TensorId output_of(const CompiledModel& m, int32_t j) {
  return j < 0 ? m.t.input_f32 : m.arch.layers[static_cast<size_t>(j)].out;
}

TensorId layer_input(const CompiledModel& m, int i) {
  return output_of(m, m.arch.layers[static_cast<size_t>(i)].input);
}

GraphNode add_node(TensorId a, TensorId b, TensorId y, const std::string& label, bool relu = false);

// The forward node of a two-input join: add / add_relu for a residual block, concat for a concat block.
GraphNode join_node(const LayerDescriptor& l, TensorId a, TensorId b) {
  if (l.kind == LayerKind::ADD) return add_node(a, b, l.out, l.name, l.fused_relu);
  GraphNode n = compute_node(FR_OP_CONCAT, l.name, {a, b}, {l.out});
  return n;
}

GraphNode add_node(TensorId a, TensorId b, TensorId y, const std::string& label, bool relu) {
  GraphNode n = compute_node(relu ? FR_OP_ADD_RELU : FR_OP_ADD, label, {a, b}, {y});
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

void emit_layer_forward(EmitContext& cx, const CompiledModel& m, int i);

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

// Forward of layer i in training (views emit nothing; residual joins emit their add).
void emit_layer_forward(EmitContext& cx, const CompiledModel& m, int i) {
  const auto& l = m.arch.layers[static_cast<size_t>(i)];
  if (l.fused_into_join) return;                     // a batchnorm the join below computes
  if (is_fused_head(m, i)) return;                   // in fc_softmax_xent (emit_fused_head)
  if (l.kind == LayerKind::ADD && l.join_bn >= 0) {  // batchnorm_add: bn(x) + the other branch
    const auto& bn = m.arch.layers[static_cast<size_t>(l.join_bn)];
    const int32_t other = l.join_bn == l.input ? l.input2 : l.input;
    cx.add(batchnorm_add_node(bn, layer_input(m, l.join_bn), output_of(m, other), l.out, l.fused_relu));
  } else if (l.kind == LayerKind::ADD || l.kind == LayerKind::CONCAT) {
    cx.add(join_node(l, layer_input(m, i), output_of(m, l.input2)));
  } else if (!rule_for(l.kind).is_view(l, true)) {
    rule_for(l.kind).forward(cx, l, layer_input(m, i), l.out, true);
  }
}

// Backward of layer i: first the sum of its two output-gradient contributions, then its own node(s).
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
  if (l.join_grad_by_conv >= 0) return;  // the pass below is in that conv's input gradient (join_epilogue)
  if (l.kind == LayerKind::ADD && l.fused_relu && l.grad_sum_a != kNoTensor) {  // sum and mask in one pass
    cx.add(with_grad_sums(
        compute_node(FR_OP_ADD_RELU_BACKWARD, l.name, {l.grad_sum_a, l.grad_sum_b, l.out}, {l.grad_in})));
    return;
  }
  if (l.kind == LayerKind::RELU && l.grad_sums_bn >= 0) {  // the relu fused into a batchnorm, read twice: the
    // two parts summed and masked by the batchnorm's output (its backward then gets the gradient premasked)
    cx.add(with_grad_sums(
        compute_node(FR_OP_ADD_RELU_BACKWARD, l.name, {l.grad_sum_a, l.grad_sum_b, l.out}, {l.grad_out})));
    return;
  }
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
  rule_for(l.kind).backward(cx, l, layer_input(m, i), l.out, l.grad_out, dx);
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

}  // namespace

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
  return early_grads_on(m) && m.options.precision != DType::F16;
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
  const RangeRef scalars = RangeRef::of(m.t.step_scalars, DType::U8);
  auto rr = [&](Family f) {
    return RangeRef::part(param_region(f, gr.first), param_region(f, gr.last), skip, take);
  };
  GraphNode n;
  if (o.type == Optimizer::Type::SGD) {
    std::vector<RangeRef> rout = {rr(Family::W)};
    if (o.uses_m()) rout.push_back(rr(Family::M));
    n = range_node(FR_OP_SGD_UPDATE, {rr(Family::G), scalars}, rout, "sgd");
    n.with_params(FrSgdParams{o.momentum, gr.wd, o.nesterov ? 1 : 0, 0});
  } else {
    n = range_node(FR_OP_ADAM_UPDATE, {rr(Family::G), scalars}, {rr(Family::W), rr(Family::M), rr(Family::V)},
                   o.name());
    n.with_params(FrAdamParams{o.beta1, o.beta2, o.eps, gr.wd, o.type == Optimizer::Type::ADAMW ? 1 : 0, 0});
  }
  return n;
}

// A cast over bytes [skip, skip + take) of the conv kinds' span (FIRST_CONV..DEEP_CONV) in W-family bytes:
// G16 -> G (fp16: with the unscale, unscale_grads) or W -> A; the 16-bit side has half the bytes.
GraphNode conv_cast_node(const CompiledModel& m, bool grads, uint64_t skip, int64_t take,
                         const std::string& label) {
  const DType low = m.options.precision;
  auto convs = [&](Family f, DType t, uint64_t sk, int64_t tk) {
    return RangeRef::part(param_region(f, ParamKind::FIRST_CONV), param_region(f, ParamKind::DEEP_CONV), sk,
                          tk, t);
  };
  const RangeRef wide = convs(grads ? Family::G : Family::W, DType::F32, skip, take);
  const RangeRef narrow = convs(grads ? Family::G16 : Family::A, low, skip / 2, take < 0 ? -1 : take / 2);
  if (!grads) return range_node(FR_OP_CAST_RANGE, {wide}, {narrow}, label);
  if (low == DType::F16)
    return range_node(FR_OP_UNSCALE_GRADS, {narrow}, {wide, RangeRef::of(m.t.step_scalars, DType::U8)},
                      label);
  return range_node(FR_OP_CAST_RANGE, {narrow}, {wide}, label);
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

// The conv kinds' W span (FIRST_CONV..DEEP_CONV), in whose bytes conv_cast_node counts.
RegionSpan conv_span(const MemoryPlan& p) {
  return p.region_range(param_region(Family::W, ParamKind::FIRST_CONV),
                        param_region(Family::W, ParamKind::DEEP_CONV));
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
// DEEP_FWD_BWD on the side stream (the early update); make(skip, take, early) builds each node, take -1
// meaning to the span's end.
// A hole [hole_lo, hole_hi) inside [0, cut) is left out (a frozen first layer's weight).
template <class Make>
void add_late_and_early(ComputationGraph& g, GraphId late, uint64_t bytes, uint64_t cut, uint64_t end,
                        Make make, uint64_t hole_lo = 0, uint64_t hole_hi = 0) {
  auto take = [&](uint64_t from, uint64_t to) {
    return to >= bytes ? int64_t{-1} : static_cast<int64_t>(to - from);
  };
  FRESCO_CHECK(hole_hi <= cut, ErrorCode::kInternal, "a range's hole lies past its late part");
  if (hole_hi > hole_lo) {
    if (hole_lo > 0) g.add(late, make(0, take(0, hole_lo), false));
    if (cut > hole_hi) g.add(late, make(hole_hi, take(hole_hi, cut), false));
  } else if (cut > 0 || bytes == 0) {
    g.add(late, make(0, take(0, cut), false));
  }
  if (cut < end) {
    GraphNode n = make(cut, take(cut, end), true);
    n.side_stream = true;
    g.add(GraphId::DEEP_FWD_BWD, std::move(n));
  }
}

// Each early part's nodes (bf16: grad cast, update, weight cast; fp32: the update) go into DEEP_FWD_BWD,
// detached, after the first join that follows the weight gradient of the part's first layer.
void place_early_parts(ComputationGraph& g, const CompiledModel& m, const std::vector<EarlyPart>& parts) {
  const MemoryPlan& p = m.base_plan();
  const bool mixed = m.options.precision != DType::F32;
  const RegionSpan conv = conv_span(p);
  const ParamGroup gr = param_groups(m.options.optimizer).back();  // the group that ends with DEEP_CONV
  const RegionSpan group =
      p.region_range(param_region(Family::W, gr.first), param_region(Family::W, gr.last));
  std::vector<GraphNode>& nodes = g.mutable_nodes(GraphId::DEEP_FWD_BWD);
  for (size_t k = 0; k < parts.size(); ++k) {
    const EarlyPart& part = parts[k];
    const LayerDescriptor& l = m.arch.layers[static_cast<size_t>(part.layer)];
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
    if (mixed) add.push_back(conv_cast_node(m, true, part.lo - conv.offset, take, "grad cast" + tag));
    add.push_back(update_node(m, gr, part.lo - group.offset, take));
    add.back().label += tag;
    if (mixed) add.push_back(conv_cast_node(m, false, part.lo - conv.offset, take, "weight cast" + tag));
    for (GraphNode& n : add) n.side_stream = true, n.detached = detach;
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at), add.begin(), add.end());
  }
}

// OPTIMIZER: one update per parameter group (region ranges), then step_done, which advances the step counter
// and writes the next step's lr (the lr of step 0 is written by the host at compile time). With an early
// update the parts past the first layer's are updated at the end of DEEP_FWD_BWD on the side stream (and the
// early parts before, place_early_parts); in bf16 each update's W -> A cast follows it.
void emit_optimizer(ComputationGraph& g, const CompiledModel& m, const std::vector<EarlyPart>& parts) {
  const RangeRef scalars = RangeRef::of(m.t.step_scalars, DType::U8);
  const MemoryPlan& p = m.base_plan();
  const LayerDescriptor& first = m.arch.layers[static_cast<size_t>(first_param_index(m.arch))];
  const bool early = early_update_on(m);
  const uint64_t parts_begin = early_parts_begin(m, parts);
  for (const ParamGroup& gr : param_groups(m.options.optimizer)) {
    const RegionSpan span =
        p.region_range(param_region(Family::W, gr.first), param_region(Family::W, gr.last));
    if (span.bytes == 0) continue;
    // Bytes of the group up to the end of the first layer's last parameter in it: the rest has its gradient
    // at the end of DEEP_FWD_BWD and is updated there (CompileOptions::early_update). The gamma of the
    // batchnorm whose backward the first conv's weight gradient applies is read there, after DEEP_FWD_BWD, so
    // it waits with the first layer's (an early update would race that read on the side stream).
    const TensorId read_late = first.wgrad_prologue_bn >= 0
                                   ? m.arch.layers[static_cast<size_t>(first.wgrad_prologue_bn)].weight
                                   : kNoTensor;
    const uint64_t cut = early ? first_layer_cut(p, span, {first.weight, first.bias, read_late}) : span.bytes;
    const uint64_t end = gr.last == ParamKind::DEEP_CONV ? parts_begin - span.offset : span.bytes;
    // A frozen first layer's weight (all of W_FIRST_CONV) is left out of the ranges.
    uint64_t hole_lo = 0, hole_hi = 0;
    if (m.options.freeze_first_layer) {
      const DTensor& w = p.tensor(first.weight);
      if (static_cast<uint64_t>(w.offset) >= span.offset &&
          static_cast<uint64_t>(w.offset) < span.offset + span.bytes)
        hole_lo = static_cast<uint64_t>(w.offset) - span.offset, hole_hi = hole_lo + w.slot_bytes;
    }
    add_late_and_early(
        g, GraphId::OPTIMIZER, span.bytes, cut, end,
        [&](uint64_t skip, int64_t take, bool e) {
          GraphNode n = update_node(m, gr, skip, take);
          if (e) n.label += " (early)";
          return n;
        },
        hole_lo, hole_hi);
  }
  const ConvSplit conv = conv_split(m, parts, early);
  if (early && m.options.precision != DType::F32 &&
      conv.span.bytes > 0)  // the W -> A casts after the updates
    add_late_and_early(
        g, GraphId::OPTIMIZER, conv.span.bytes, conv.cut, conv.end, [&](uint64_t skip, int64_t take, bool e) {
          return conv_cast_node(m, false, skip, take, e ? "weight cast (early)" : "weight cast");
        });
  if (m.options.precision == DType::F16)  // GradScaler.update: back off after a skipped step, grow after 2000
    g.add(GraphId::OPTIMIZER, range_node(FR_OP_LOSS_SCALE_UPDATE, {}, {scalars}, "loss scale"))
        .with_params(FrLossScaleParams{2.0f, 0.5f, 2000, 0});
  g.add(GraphId::OPTIMIZER,
        range_node(FR_OP_STEP_DONE, {RangeRef::of(m.t.lr_table, DType::F32)}, {scalars}, "step and next lr"))
      .with_params(m.schedule);
}
}  // namespace

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
  m.schedule = schedule_params(m.options);
  const std::vector<EarlyPart> parts = early_parts(m);
  if (m.options.precision != DType::F32) {  // G16 -> G before the optimizer, W -> A after it
    const bool scaled = m.options.precision == DType::F16;
    // With an early update the gradients stored after the first layer's are cast at the end of
    // DEEP_FWD_BWD on the side stream (the early parts' before, place_early_parts); the late cast takes the
    // first layer's. fp16 casts with unscale_grads, which unscales and checks them in the same pass
    // (NAN_CHECK_AND_GRAD_SCALING).
    const ConvSplit conv = conv_split(m, parts, early_grads_on(m));
    const std::string label = scaled ? "grad cast and unscale" : "grad cast";
    add_late_and_early(tr, scaled ? GraphId::NAN_CHECK_AND_GRAD_SCALING : GraphId::GRAD_CAST, conv.span.bytes,
                       conv.cut, conv.end, [&](uint64_t skip, int64_t take, bool e) {
                         return conv_cast_node(m, true, skip, take, e ? label + " (early)" : label);
                       });
    // The whole cast, for the host's writes (DeepLearningTask::cast_weights) and the step without an early
    // update; with one, each update's cast follows it (emit_optimizer, place_early_parts).
    tr.add(GraphId::WEIGHT_CAST, conv_cast_node(m, false, 0, -1, "weight cast"));
    m.weight_cast_in_step = !early_update_on(m);
  }
  if (m.options.precision == DType::F16) {  // the fp32 gradients (batchnorm, fc) back to true scale too
    const RangeRef fp32_grads = RangeRef::regions(param_region(Family::G, ParamKind::BN_BIAS),
                                                  param_region(Family::G, ParamKind::FC_WEIGHT), DType::F32);
    if (m.base_plan().region_range(fp32_grads.first, fp32_grads.last).bytes > 0)
      tr.add(GraphId::NAN_CHECK_AND_GRAD_SCALING,
             range_node(FR_OP_UNSCALE_GRADS, {}, {fp32_grads, RangeRef::of(m.t.step_scalars, DType::U8)},
                        "unscale grads"));
  }
  emit_optimizer(tr, m, parts);
  place_early_parts(tr, m, parts);
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
    const Shape s = m.arch.input_sample;
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
  if (s.type == Scheduler::Type::TABLE) return;
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
