// Compiler: BluePrint -> ArchPlan -> (shapes, slots, memory plans, zero-shape graphs, atlas) in five stages.
// Invariants: every variant's MemoryPlan has the same offsets for the same tensor; the train graph is shared
// by all train variants and the inference graph by both val variants. Tested by test_compiler.cpp.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fresco/core/atlas.h"
#include "fresco/core/blueprint.h"
#include "fresco/core/graph.h"
#include "fresco/core/memory_plan.h"
#include "fresco/core/train_config.h"
#include "fresco/ops.h"

namespace fresco {

enum class LayerKind : uint8_t {
  FC,
  RELU,
  FLATTEN,
  DROPOUT,
  CUSTOM,
  CONV,
  BN,
  MAXPOOL,
  AVGPOOL,
  GAP,
  GELU,
  ADD,
  SILU,
  SIGMOID,
  TANH,
  CAST,   // inserted by the compiler where an fp32 layer meets low-precision maps (mixed precision)
  CONCAT  // the join of a concat block: channels of the main branch, then of the second
};

// One layer of the ArchPlan: kind, params, the tensors it owns, and where its activations live.
struct LayerDescriptor {
  int32_t index = 0;
  LayerKind kind = LayerKind::FC;
  LayerSpec spec;
  std::string name;              // "fc0", "relu1", ...
  Shape in_sample, out_sample;   // per-sample shapes (n = 1)
  DType out_dtype = DType::F32;  // of the output map (and of its gradient); low precision per CompileOptions
  bool first_param_layer = false;
  bool fused_relu = false;       // fc, bn, add: a following relu is computed in this layer's kernels
  bool fused_into_prev = false;  // relu: done by the previous fc (no node, output aliases the fc's)
  bool fused_into_join = false;  // bn (training): computed by the residual join that reads it (join_bn)
  // fc or bn with fused_relu: its output gradient arrives already masked (the fused head masks it:
  // CompileOptions::fuse_head; CompileOptions::grad_sums), so its backward does not mask it again.
  bool grad_premasked = false;
  int32_t join_bn = -1;  // add (training): the batchnorm input it computes (batchnorm_add), or -1
  // CompileOptions::conv_stats: a bias-free conv whose only reader is a batchnorm writes the per-channel sums
  // of its output in training (writes_sums), and that batchnorm takes its batch statistics from them
  // (reads_sums); `sums` is the f32 [2C] tensor on both.
  bool writes_sums = false, reads_sums = false;
  TensorId sums = kNoTensor;
  // CompileOptions::grad_sums: a layer whose backward writes the masked output gradient of a batchnorm (a
  // residual join's relu, or the relu fused into that batchnorm when two layers read it) also writes the
  // batchnorm's two gradient sums (grad_sums_bn: that batchnorm's index, else -1); the batchnorm's backward
  // reads them from `grad_sums` (f32 [2C]) instead of its own pass. A join whose branches both end in such a
  // batchnorm (a projection shortcut) writes the second one's too (grad_sums_bn2). A conv that applies the
  // batchnorm it reads (prologue_bn), the only reader of its relu, writes them from its input gradient
  // (conv2d_backward's batchnorm gradient epilogue); its `grad_sums` is then the batchnorm's.
  int32_t grad_sums_bn = -1, grad_sums_bn2 = -1;
  TensorId grad_sums = kNoTensor;
  // CompileOptions::conv_prologue: a batchnorm (with fused relu) applied by the conv that reads it
  // (applied_by_conv: in training it computes only its statistics, and the conv writes its output); on the
  // conv, that batchnorm's index (prologue_bn), its input map and its gamma, beta, save_mean and
  // save_invstd.
  bool applied_by_conv = false;
  int32_t prologue_bn = -1;
  TensorId prologue_input = kNoTensor;
  // CompileOptions::join_prologue: on the conv, the join whose batchnorm it applies (prologue_bn is then
  // that join's batchnorm; the join, applied_by_conv, computes only the statistics) and the join's other
  // branch, added before the relu (prologue_residual).
  int32_t prologue_join = -1;
  TensorId prologue_residual = kNoTensor;
  std::array<TensorId, 4> prologue{kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  // CompileOptions::conv_prologue with grad_sums at the first layer: a batchnorm whose premasked backward
  // with gradient sums writes no dx (dx_by_conv: its weights-only form) because the first conv, whose output
  // only it reads, applies that dx in its weight gradient (conv2d_backward's batchnorm gradient prologue,
  // ops.h); on the conv, the batchnorm's index (wgrad_prologue_bn) and its gamma, save_mean, save_invstd and
  // grad_sums. The conv's output gradient is then the batchnorm's. A frozen first conv
  // (freeze_first_layer) has no weight gradient: the same weights-only form, and no one computes that dx.
  bool dx_by_conv = false;
  int32_t wgrad_prologue_bn = -1;
  std::array<TensorId, 4> wgrad_prologue{kNoTensor, kNoTensor, kNoTensor, kNoTensor};
  // CompileOptions::join_epilogue: a masking layer (a fused join or a relu fused into a batchnorm, with
  // grad_sums_bn) whose pass the conv reading its relu's output does in its input gradient
  // (join_grad_by_conv: that conv's index; the layer's output gradient is then the conv's grad_in); on the
  // conv, the masking layer's index (join_epilogue_of) and the epilogue's operands {the other reader's
  // gradient part, the batchnorm's input, its save_mean}, with its grad_sums the batchnorm's.
  int32_t join_grad_by_conv = -1, join_epilogue_of = -1;
  std::array<TensorId, 3> join_epilogue{kNoTensor, kNoTensor, kNoTensor};
  // CompileOptions::compact_shortcut_grads: a strided 1x1 conv whose input gradient is written compact, at
  // its output positions only (compact_dx; ops.h, "Compact input gradient"), and the masking layer whose
  // add_relu_backward adds it there (compact_part_stride: the conv's stride; 0: none).
  bool compact_dx = false;
  int32_t compact_part_stride = 0;
  // CompileOptions::subsampled_shortcuts: such a conv of stride 2 reads, in training, the subsampled map
  // (subsample_in, at stride 1) that the batchnorm_add join it reads writes beside its output (on the join:
  // subsample_out, ops.h's subsampled output).
  bool reads_subsample = false;
  TensorId subsample_in = kNoTensor, subsample_out = kNoTensor;
  bool writes_subsample = false;
  // Set by create_memory_plans:
  TensorId weight = kNoTensor, bias = kNoTensor;
  TensorId grad_weight = kNoTensor, grad_bias = kNoTensor;
  // Mixed precision (conv weights): the low-precision compute copy (A region, cast from W before each step)
  // and the low-precision weight gradient (G16, cast to G before the optimizer). kNoTensor in fp32.
  TensorId compute_weight = kNoTensor, grad_weight_low = kNoTensor;
  TensorId out = kNoTensor;       // activation (aliases the input for views)
  TensorId grad_in = kNoTensor;   // gradient w.r.t. this layer's input (kNoTensor when not needed)
  TensorId grad_in2 = kNoTensor;  // concat: gradient w.r.t. the second input
  // The graph: the layers whose outputs this one reads (-1: the network input). Only ADD (a residual join)
  // and CONCAT have two.
  int32_t input = -1, input2 = -1;
  // Gradient w.r.t. this layer's output; when two consumers contribute, grad_out = grad_sum_a + grad_sum_b.
  TensorId grad_out = kNoTensor, grad_sum_a = kNoTensor, grad_sum_b = kNoTensor;
  // batchnorm: running statistics (B region) and the batch statistics forward saves for backward (T region)
  TensorId running_mean = kNoTensor, running_var = kNoTensor, save_mean = kNoTensor, save_invstd = kNoTensor;
  TensorId bn_scale = kNoTensor, bn_shift = kNoTensor;  // batchnorm's folded inference form (B_BN_STATS)
};

struct ArchPlan {
  std::vector<LayerDescriptor> layers;
  Shape input_sample;              // per-sample input (1,H,W,C)
  DType input_dtype = DType::F32;  // of the normalised input map
  int32_t num_classes = 0;
  int64_t parameter_count = 0;
  // CompileOptions::fuse_head took effect: the last layer's training forward, the loss and the last layer's
  // input gradient are one fc_softmax_xent node.
  bool fused_head = false;
  // With fused_head: the fc whose fused relu output the head reads (its grad_premasked), so the head masks
  // its input gradient; else the head's input is not such a relu output and nothing masks.
  bool fused_head_masks_input = false;
};

struct CompileOptions {
  Shape input_sample;  // (1,H,W,C) of one stored image
  int32_t num_classes = 0;
  int64_t batch = 128;
  int64_t train_samples = 0;
  int64_t val_batch = 0;  // 0 = same as batch
  int64_t val_samples = 0;
  int64_t total_steps = 0;      // for cosine schedules
  int64_t steps_per_epoch = 0;  // for warm-up in epochs
  Normalization normalize;
  CrossEntropyLoss loss;
  Optimizer optimizer;
  Scheduler scheduler;
  uint64_t seed = 0;
  bool fuse_activations = true;  // fc followed by relu -> one fc with a relu epilogue and a masked backward
  // Training: the last layer, when it is an fc with at most 32 fp32 outputs that is not the first trainable
  // layer, runs its forward, the softmax cross-entropy and its input gradient as one fc_softmax_xent node,
  // which also applies the previous fc's fused relu mask (ops.h); its weight gradient stays a node of its
  // own. The same numbers (tests: the node on both backends, training bits on both). H200, same call: MLP
  // b1024 0.2670 -> 0.2642 ms, b128 0.1040 -> 0.1020 (docs/performance.md).
  bool fuse_head = true;
  // A batchnorm whose only reader is a residual join is computed by the join in training (batchnorm_add: one
  // element-wise pass writes bn(x) + shortcut, then the join's relu; the batchnorm's output is not stored).
  bool fuse_joins = true;
  // A training batchnorm that reads a bias-free conv nothing else reads takes its batch mean and variance
  // from the per-channel sums of x and x^2 that the conv writes (conv2d's second output, ops.h), instead of
  // its own pass over the map; the variance is then sumsq/n - mean^2 from f32 sums rather than the backend's
  // own statistics in double. AUTO: in mixed precision only (fp32 keeps the backends' own statistics, whose
  // CPU/CUDA agreement is tighter), and only on the convs the CUDA backend's own kernels run (conv_prologue's
  // Hopper shape, a narrow stem of at most 32 taps and 16 / 32 / 64 outputs), which add the sums in their
  // epilogue in a fixed order. On a cuDNN convolution the sums are a separate pass (a launch more than the
  // batchnorm's own statistics), or, with ON and FRESCO_CUDNN_GENSTATS, cuDNN's fused statistics, which add
  // with atomics in an order that changes from run to run (docs/decisions.md).
  enum class ConvStats { AUTO, ON, OFF };
  ConvStats conv_stats = ConvStats::AUTO;
  // A training batchnorm whose output gradient is written by a masking pass (a residual join's relu backward,
  // or the two-part sum at a relu fused into the batchnorm) gets its two gradient sums (sum dy, sum dy (x -
  // mean)) from that pass, which reads x too, instead of its own pass over dy and x (ops.h, "Gradient sums"):
  // one pass over the map fewer per join. The sums are added in double and handed over in f32. AUTO: in mixed
  // precision only, like conv_stats.
  enum class GradSums { AUTO, ON, OFF };
  GradSums grad_sums = GradSums::AUTO;
  // A training batchnorm with a fused relu whose first reader is a conv (a later one may be a residual
  // join's shortcut) is applied by that conv as it reads its input (ops.h, "Batchnorm prologue"): the conv
  // takes the batchnorm's input with its gamma, beta and saved statistics and writes the batchnorm's output
  // beside its own, and the batchnorm computes only its statistics (one pass over the map fewer: its
  // reading; the backward is unchanged). The same values as
  // the separate apply pass on the CUDA backend, bit for bit; the CPU backend's own batchnorm forward rounds
  // differently, so its numbers move within rounding. AUTO: in mixed precision, for the convs the CUDA
  // backend fuses it into (3x3, stride 1, padding 1, dilation 1, one group, no bias, 64 -> 64 channels, maps
  // 32 wide: a CIFAR ResNet's stage 1); elsewhere a backend runs it as a pass of its own, the same work as
  // without (docs/decisions.md).
  enum class ConvPrologue { AUTO, ON, OFF };
  ConvPrologue conv_prologue = ConvPrologue::AUTO;
  // With grad_sums: a masking pass that sums two gradient parts (add_relu_backward with one batchnorm's
  // gradient sums, at a relu whose output a conv and one later layer read: a residual join's, or one fused
  // into a batchnorm) is done by that conv's input gradient as it writes it (ops.h, "Join epilogue"): one
  // pass over four maps fewer per such relu. The same values as the pass (the sums added in another order on
  // the CUDA backend's own kernel; the CPU's bits are the pass's). AUTO: in mixed precision, on the convs the
  // CUDA backend's own input gradient takes it (conv_prologue's shape); elsewhere a backend runs the pass
  // after the input gradient, the same work as without.
  enum class JoinEpilogue { AUTO, ON, OFF };
  JoinEpilogue join_epilogue = JoinEpilogue::AUTO;
  // With conv_prologue: a residual join computed with its batchnorm and relu (batchnorm_add) whose output a
  // conv reads first (the next block's, before the next join reads it as its shortcut) is applied by that
  // conv as it reads its input (ops.h, "Join prologue": the batchnorm's input, its statistics and the join's
  // other branch in, the join's output written beside the conv's); the join then computes only the
  // batchnorm's statistics. One pass over three maps fewer per such join. The same values as batchnorm_add
  // on the CUDA backend, bit for bit; the CPU's batchnorm rounds differently, as for conv_prologue. AUTO:
  // off (measured no faster on an H100: docs/decisions.md, "Join prologue"); ON: wherever the pattern occurs
  // and conv_prologue is on for that conv.
  enum class JoinPrologue { AUTO, ON, OFF };
  JoinPrologue join_prologue = JoinPrologue::AUTO;
  // With overlap_weight_gradients: the input gradient of a strided 1x1 conv (padding 0, dilation 1, one
  // group: a projection shortcut) that reads a relu's output with one more layer, whose two gradient parts
  // add_relu_backward sums and masks, is written compact, at the conv's output positions only ([N, P, Q, C]:
  // ops.h, "Compact input gradient"), and add_relu_backward adds it at those positions: the shortcut's input
  // gradient writes and the masking pass reads a quarter of the full-size part (stride 2), whose other
  // positions only ever held zeros. The same values bit for bit where the backend computes the compact part
  // as it did those positions (the CPU does; cuDNN's 1x1 input gradient at stride 1 may add in another
  // order than at stride 2). AUTO: in mixed precision, like the other fusions.
  enum class CompactShortcutGrads { AUTO, ON, OFF };
  CompactShortcutGrads compact_shortcut_grads = CompactShortcutGrads::AUTO;
  // With compact_shortcut_grads: where such a shortcut has stride 2 and reads a residual join computed with
  // its batchnorm (batchnorm_add), the join also writes the even rows and columns of its output as a quarter-
  // size map (ops.h, batchnorm_add's subsampled output) and, in training, the shortcut reads that at stride
  // 1: its forward and its weight gradient become plain 1x1 convolutions (GEMMs) over the positions they
  // read instead of cuDNN's strided kernels, and its input gradient is the compact part as before. The same
  // products and sums; a backend may order them otherwise at stride 1 than at stride 2 (the CPU's differ in
  // rounding). One quarter-size map more of memory per such join. AUTO: in bf16, for shortcuts of at most
  // 2^34 multiply-adds at the step's batch (ResNet-18 b512's: 40-61 us a step faster on three H100s, 28 MiB
  // more; fp16 42 us faster but above the device memory of PyTorch's best mode on the H200;
  // ResNet-50 b256's, 24x larger, 0.2 ms slower and 171 MiB more: docs/decisions.md).
  enum class SubsampledShortcuts { AUTO, ON, OFF };
  SubsampledShortcuts subsampled_shortcuts = SubsampledShortcuts::AUTO;
  // Weight gradients as separate nodes on a second stream, beside the input-gradient chain (device
  // permitting). Feature gradients then stay allocated until the end of backward, since the side stream may
  // still read them.
  bool overlap_weight_gradients = true;
  // With overlap_weight_gradients, in fp32 and bf16: the optimizer update of every parameter stored after
  // the first layer's (in each parameter group) runs at the end of DEEP_FWD_BWD on the side stream, beside
  // the first layer's backward, instead of in OPTIMIZER (in bf16 with those gradients' G16 -> G cast before
  // it and their W -> A cast after it). Same arithmetic, same order per parameter. fp16 moves only those
  // gradients' cast and unscale there (one pass): its loss scaling skips the whole update on an inf or NaN in
  // any gradient, the first layer's too. AUTO: when the first layer is an fc whose weight gradient has at
  // least early_update_min_macs multiply-adds (batch x in x out), long enough to hide the other updates, or
  // in mixed precision (bf16 or fp16) when it is a conv. On the H200 the MLP step at batch 1024 (8.2e8) went
  // from 0.2726 to 0.2666 ms with it, at batch 128 (1.0e8) from 0.104 to 0.112 (docs/performance.md).
  enum class EarlyUpdate { AUTO, ON, OFF };
  EarlyUpdate early_update = EarlyUpdate::AUTO;
  int64_t early_update_min_macs = 400'000'000;
  // In mixed precision (bf16 or fp16): every optimizer update of conv weights (sgd_update, adam_update; LARS
  // keeps its casts) writes their 16-bit compute copy (the A region) from the values it has just computed
  // (ops.h, the weight copy), instead of a W -> A cast_range after it that reads the weights again: the same
  // bits, 4 bytes a conv weight less traffic and one node fewer per updated part. A plugin whose update
  // kernels do not declare FR_KERNEL_WEIGHT_COPY needs false (the runtime says so).
  bool fused_weight_cast = true;
  // In mixed precision (bf16 or fp16): the updates of conv weights (sgd_update, adam_update) read their
  // 16-bit gradients (G16) themselves, unscaled as they are read (ops.h, the 16-bit gradients), instead of
  // a G16 -> G cast_range (fp16: unscale_grads' cast form) before them; fp16 checks those gradients for inf
  // and NaN with check_grads, which reads them and writes only the skip flag. The same updates bit for bit;
  // per conv weight 6 (fp16) or 8 (bf16) bytes less traffic a step, and 4 bytes less memory (the conv
  // weights have no f32 gradients). Not with LARS (its trust ratios read the f32 gradients) nor several
  // ranks (the all-reduce averages them): those keep the casts. AUTO: fp16 only. ResNet-18 b512 (four
  // interleaved rounds on an H100, docs/performance.md): fp16 5.101 against 5.120 ms a step (the check runs
  // beside the stem's weight gradient, and the tail's update reads 2 bytes a gradient less), bf16 5.083
  // against 5.049 (slower, not explained yet; its casts ran beside the backward); 1323.9 against 1366.5 MiB
  // either way. A plugin whose update kernels do not declare FR_KERNEL_HALF_GRADS needs OFF (the runtime
  // says so).
  enum class Grads16Update { AUTO, ON, OFF };
  Grads16Update update_from_grads16 = Grads16Update::AUTO;
  // With an early update (not fp16): up to this many parts of the deep conv weights, the last layers' first,
  // each whole tensors of at least 1 / (parts + 1) of their bytes (the first deep conv always stays with
  // the rest), are cast, updated and (bf16) cast back while the backward
  // still runs, on a stream that the backward's joins do not wait for (GraphNode::detached), as soon as
  // their weight gradients are final. ResNet-18 bf16 b512 on the H200, three rounds in one call: 0 parts
  // 4.702-4.705 ms, 1: 4.688-4.697, 2: 4.678-4.690, 3: 4.679-4.688; later (the twentieth session), 3 parts
  // left stages 1-3 (2.8M parameters) to the end of the backward: 5 parts 4.623-4.629 against 4.640-4.654,
  // ResNet-50 34.88 against 35.08 ms (docs/performance.md).
  int early_update_parts = 5;
  // The optimizer's update of a step runs at the start of the next step instead of at its end: the step
  // ends once its gradients are checked (fp16) and cast, keeps its step scalars (lr, counters, the skip
  // flag) for the update and runs the loss scale's update and step_done (GraphId::STEP_END); the next step
  // begins with the update (OPTIMIZER) reading the kept scalars, the weights of the first layers on the main
  // stream and the rest of the conv weights (the update writing their 16-bit copies) on the update stream,
  // beside the forward, which waits for them at the first node that reads them (GraphNode::join_update).
  // The executor runs the last pending update alone after the last step of every training call
  // (Executor::finish_updates), so no caller sees weights without their update. The same arithmetic on the
  // same values: the same bits. Built for fp16, whose whole update waits for the last gradient's check
  // (GradScaler's skip) at the end of the backward, where bf16's runs early beside it; on ResNet-18 b512
  // (H100) it measured no faster in fp16 and 55 us slower in bf16 (docs/decisions.md), so AUTO is off and
  // ON turns it on in any precision. Needs sgd or adam(w) (not LARS), one rank, and in mixed precision the
  // fused weight copies (fused_weight_cast); replaces early_update's updates (the early gradient casts
  // stay).
  enum class DeferredUpdate { AUTO, ON, OFF };
  DeferredUpdate deferred_update = DeferredUpdate::AUTO;
  // fp16 with a conv first layer, an early update's conditions (overlap_weight_gradients; sgd or adam(w),
  // not LARS; one rank; no deferred update) and fused_weight_cast: the conv weights past the first layer's
  // are updated while the backward still runs, as bf16's early update and its parts do, before the last
  // gradients (the first layer's) are checked for inf and NaN. Each such update first copies the f32 ranges
  // it writes (weights, buffers) into backups, and OPTIMIZER ends with restore_if_skipped (ops.h), which on a
  // skipped step copies them back and recasts the 16-bit copies: GradScaler's skip, weights and buffers as
  // before the step, the same bits as the late update on every step. The backups are feature-region tensors
  // that live from their update to the end of the step, placed where the backward has freed maps: no early
  // part is placed before the layer at which the backups fit without raising the plan's size (CompiledModel::
  // speculative_layer; where none exists, where the plan grows least). The batchnorm and fc parameters
  // (f32 gradients, unscaled after the check) stay late. AUTO is off: on an H100 it measured correct and no
  // faster (its early updates share the backward's memory bandwidth; docs/decisions.md); ON turns it on
  // (refused outside fp16 and the conditions above).
  enum class SpeculativeUpdate { AUTO, ON, OFF };
  SpeculativeUpdate speculative_update = SpeculativeUpdate::AUTO;
  // How a speculative update keeps what it overwrites: IN_UPDATE (default) the update kernel stores each
  // value into its backup as it loads it (ops.h, sgd_update's backups: 8 bytes a parameter written), COPIES
  // a copy node of each range before the update (16 bytes a parameter read and written, any backend's copy).
  enum class SpeculativeBackups { IN_UPDATE, COPIES };
  SpeculativeBackups speculative_backups = SpeculativeBackups::IN_UPDATE;
  // With overlap_weight_gradients: an fc layer's weight gradient forks onto the side stream after the next
  // fc input gradient on the main stream instead of after its own, when that input gradient has at least
  // defer_fc_min_macs multiply-adds (batch x in x out): one that large fills a big GPU alone, and sharing it
  // with a weight gradient only slows the critical path (the MLP's fc2 weight gradient, split-K over 256
  // blocks, had slowed fc1's input gradient from 29 to 48 us at batch 1024 on the H200; at batch 128 the
  // small GEMMs gain from running side by side: docs/performance.md). The same nodes, the same numbers;
  // never past a join. 0 defers whatever the size.
  bool defer_fc_weight_gradients = true;
  int64_t defer_fc_min_macs = 100'000'000;
  // With overlap_weight_gradients: a conv input gradient over at most conv_join_lag_max values per sample
  // joins the side stream with a lag of one (GraphNode::join_lag): it waits for the weight gradients issued
  // before the previous conv input gradient, not for the latest one, which runs beside it. The side
  // stream's operands then stay allocated one join longer (more memory). The same nodes, the same numbers.
  // 0 never lags. Default 65536 (every conv of ResNet-18's CIFAR stages; ResNet-50's at 224 from stage 3):
  // with the batchnorm gradient epilogue a stage-1 weight gradient is on the input gradients' chain, and
  // lagging measured 20 us faster on average for ResNet-18 b512 (H200, six rounds per dtype, never more than
  // 6 us slower) and 0.16 ms for ResNet-50, with the same planned memory (docs/decisions.md).
  int64_t conv_join_lag_max = 65536;
  // A residual join's second branch (a projection shortcut: the chain of layers after the main branch and
  // before the join, from the block's input) forks onto the side stream before the main branch's first
  // layer, and the join waits for it (GraphNode::side_stream, join_side), so on a GPU the shortcut's
  // convolution and batchnorm run beside the main branch's. Its maps are planned live from the fork. The
  // same nodes, the same numbers (on the CPU, which runs the nodes in order, the same bits). On by default
  // since the forty-third session: ResNet-18 b512 11-19 us a step faster on an H100 in both precisions
  // (eight interleaved rounds each); the twenty-second session's H200 had it within noise, the 1x1 convs
  // taking every SM as the main branch's do (docs/decisions.md, "Forked shortcuts").
  bool fork_shortcuts = true;
  // The first layer with parameters keeps its initial weights, as a PyTorch parameter with requires_grad
  // off (a fixed stem, e.g. a whitening conv): FIRST_LAYER_BWD stays empty (no weight gradient; its G and M
  // stay zero) and the optimizer's ranges leave its weight out, weight decay included. It must be a bias-free
  // conv, whose weight has a region of its own (W_FIRST_CONV). A batchnorm after it that takes its gradient
  // sums from a masking pass (grad_sums) computes no input gradient; otherwise the layer after it still
  // computes one, which nothing reads.
  bool freeze_first_layer = false;
  // An exponential moving average of the weights (E family, ema_update in OPTIMIZER; ops.h): decay in
  // (0, 1), updated after every `ema_every`-th step; 0: none.
  double ema_decay = 0.0;
  int32_t ema_every = 1;
  // Compute precision of the maps: F32, or BF16 / F16 for mixed precision (DESIGN §3, §7): convolutions,
  // batchnorm, activations, pools and residual adds run on low-precision maps with low-precision copies of
  // the conv weights (A) and low-precision conv weight gradients (G16); fc layers, the loss, the optimizer
  // and every master weight stay fp32, with casts inserted between.
  DType precision = DType::F32;
  // Progressive resolution (train_config.h; DESIGN §4's variants): train_base and train_last run the begin
  // stage at its resolution, train_lowres and train_lowres_last the end stage at its; the val variants and
  // the memory plan's slots are at input_sample, which must be at least as large on each side. The
  // compiler uses the resolutions only (begin_epochs is the executor's); off: every variant at input_sample.
  ProgressiveResolution progressive;
  // Data parallelism (DESIGN §10): the job is one of `ranks` replicas, each training `batch` samples a step
  // (its share of the global batch) on its own device; DEEP_COMM averages every fp32 gradient over the
  // ranks (allreduce_mean) after GRAD_CAST, before the loss-scale check and the update, and the early
  // update is off. fp16 is refused with several ranks (its check would see one rank's gradients).
  int32_t ranks = 1;
};

// Handles of the job-level tensors the executor reads or writes.
struct JobTensors {
  TensorId step_scalars = kNoTensor, lr_table = kNoTensor;
  // CompileOptions::deferred_update: the step scalars of the step whose update is pending (copied from
  // step_scalars at STEP_END, read by the update at the start of the next step)
  TensorId update_scalars = kNoTensor;
  TensorId momentum_table = kNoTensor;  // a table scheduler's momenta (Scheduler::momenta), when it has them
  TensorId labels_a = kNoTensor, data_a = kNoTensor, labels_b = kNoTensor, data_b = kNoTensor;
  TensorId input_f32 = kNoTensor;  // normalised input (in ArchPlan::input_dtype; f32 unless mixed precision)
  TensorId labels = kNoTensor;     // current batch labels (copied from A or B)
  TensorId logits = kNoTensor, grad_logits = kNoTensor;
  TensorId batch_train = kNoTensor, batch_val = kNoTensor;  // FrBatchResults
  TensorId acc_train = kNoTensor, acc_val = kNoTensor;      // FrMetricAccumulators
};

struct CompiledModel {
  ArchPlan arch;
  CompileOptions options;
  std::array<std::unique_ptr<MemoryPlan>, kVariantCount> plans;  // heap: the atlas points at them
  std::unique_ptr<ComputationGraph> train, inference;
  GraphAtlas atlas;
  JobTensors t;
  std::array<int64_t, kVariantCount> batch_of{};  // batch size per variant (0 = absent)
  std::array<Shape, kVariantCount> sample_of{};   // the input's per-sample shape per variant (1,H,W,C)
  FrScheduleParams schedule{};                    // the lr schedule as the device evaluates it
  // Whether the training step runs WEIGHT_CAST (the whole W -> A cast): false when the updates write the A
  // copies (CompileOptions::fused_weight_cast) or the casts follow the early updates (early_update_parts);
  // WEIGHT_CAST then serves the host's writes only.
  bool weight_cast_in_step = true;
  // CompileOptions::deferred_update on (AUTO is off; compile() refuses ON where it cannot run): OPTIMIZER
  // holds the update that runs at the start of the next step (the executor's pending step captures) and
  // STEP_END the step's end.
  bool update_deferred() const noexcept {
    return options.deferred_update == CompileOptions::DeferredUpdate::ON;
  }
  // CompileOptions::update_from_grads16 in effect (ON, or AUTO in fp16; not LARS, one rank): the conv
  // weights' updates read G16, and the conv weights have no f32 gradients (G_FIRST_CONV and G_DEEP_CONV are
  // empty).
  bool updates_read_grads16() const noexcept {
    using G = CompileOptions::Grads16Update;
    const G g = options.update_from_grads16;
    return options.precision != DType::F32 &&
           (g == G::ON || (g == G::AUTO && options.precision == DType::F16)) &&
           options.optimizer.type != Optimizer::Type::LARS && options.ranks == 1;
  }
  const MemoryPlan& base_plan() const { return *plans[static_cast<int>(Variant::TRAIN_BASE)]; }
  // CompileOptions::speculative_update in effect: the backups of the f32 ranges its early updates write
  // (emit order; `at`: the arena offset of the range kept, `tensor`: its backup in F_FP16, live from its
  // update to the end of the step), and the layer whose weight gradient no early part is placed before (the
  // backward's order: a part of a later layer waits until then; -1: none).
  struct SpeculativeBackup {
    uint64_t at = 0, bytes = 0;
    int32_t layer = -1;  // the part's first layer; -1: the update at the end of DEEP_FWD_BWD
    TensorId tensor = kNoTensor;
  };
  bool speculative = false;
  std::vector<SpeculativeBackup> speculative_backups;
  int32_t speculative_layer = -1;
};

class Compiler {
 public:
  CompiledModel compile(const BluePrint& blueprint, const CompileOptions& options);

  // The five stages, public so tests can check each one.
  ArchPlan derive_arch_plan(const BluePrint& blueprint, const CompileOptions& options);
  void derive_all_shapes(CompiledModel& m);
  void compute_max_slot_bytes(CompiledModel& m);
  void create_memory_plans(CompiledModel& m);
  void build_computation_graph(CompiledModel& m);
  void share_or_clone(CompiledModel& m);
  // The layers of `a` with their shapes for an input of `sample` per sample (progressive resolution): the
  // same layers and fusions, each map's size propagated again. kBadConfig when a layer does not fit that
  // size, a join's branches no longer match, or a parameter's shape would change (an fc reading a
  // flattened spatial map), naming the layer.
  static ArchPlan arch_at(const ArchPlan& a, const Shape& sample);

 private:
  MemoryPlan layout_;  // base plan being built
};

}  // namespace fresco
