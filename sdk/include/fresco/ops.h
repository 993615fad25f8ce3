/* Built-in op names, their POD params and the per-step scalars that live in S-region device memory.
 * Invariants: params are plain C structs, 4-byte fields, no pointers; a kernel checks params_size before
 * reading. The tensor/range order of every op is documented next to its params and checked by
 * tests/plugins/cpu. */
#ifndef FRESCO_OPS_H_
#define FRESCO_OPS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scalars a captured graph reads every step (S region). Written only by range ops, never baked into a
 * capture. */
typedef struct FrStepScalars {
  float lr;          /* learning rate of the step being taken (written by lr_schedule) */
  float loss_scale;  /* 1 for fp32 */
  int32_t step;      /* optimizer steps taken so far (0 before the first); advanced by lr_schedule */
  int32_t skip_step; /* non-zero: the optimizer leaves weights untouched this step */
  uint32_t seed_lo;  /* run seed, for Philox draws inside kernels (dropout) */
  uint32_t seed_hi;
  int32_t epoch;
  int32_t growth_tracker; /* dynamic loss scaling: clean steps since the scale last changed */
  int32_t updates;        /* optimizer updates applied so far: step minus the skipped steps (fp16 inf/NaN).
                             Adam's bias correction counts these, as torch.optim.Adam's own step does when
                             GradScaler skips optimizer.step(); the lr schedule and dropout follow step. */
  int32_t pad_;
} FrStepScalars;

/* Dynamic loss scaling (fp16; PyTorch GradScaler semantics), all on the device:
 * softmax_xent with rin {step scalars} multiplies its gradient by loss_scale;
 * unscale_grads (range): rout {gradients (f32), step scalars}: g *= 1 / loss_scale, and skip_step = 1 when
 * any gradient is inf or NaN (the optimizers then leave the weights untouched); with rin {src (f16 or bf16)}
 * it also casts: g = float(src) * (1 / loss_scale), the same products as cast_range then unscale_grads, in
 * one pass (element counts as cast_range's); loss_scale_update (range):
 * rout {step scalars}: after a skipped step loss_scale *= backoff and growth_tracker = 0; otherwise
 * growth_tracker += 1 and, on reaching growth_interval, loss_scale *= growth and growth_tracker = 0.
 * step_done advances step, advances updates unless the step was skipped, and clears skip_step. */
typedef struct FrLossScaleParams {
  float growth;            /* 2 */
  float backoff;           /* 0.5 */
  int32_t growth_interval; /* 2000 */
  int32_t pad_;
} FrLossScaleParams;

/* ema_update (range): rout {E (f32): the averaged weights}; rin {W (f32, the same bytes as E), step
 * scalars}. An exponential moving average of the weights, as torch.optim.swa_utils.AveragedModel with
 * get_ema_multi_avg_fn(decay) updated after every `every`-th optimizer step: when (step + 1) % every == 0
 * (step as the scalars hold it before step_done), E = W the first time (step + 1 == every; AveragedModel
 * copies on its first update) and E = lerp(E, W, weight) after (fr_ema_step); otherwise E is left. It
 * runs whether or not loss scaling skipped the step, as AveragedModel does. */
typedef struct FrEmaParams {
  float weight;  /* 1 - decay, computed in double and rounded once (PyTorch's lerp weight); in (0, 1] */
  int32_t every; /* >= 1 */
} FrEmaParams;

/* fc: in {x [M,1,1,K] or [M,H,W,C] with H*W*C=K, w [N,K] (PyTorch out,in), b [N] (if has_bias)}; out {y
 * [M,N]}. */
typedef struct FrFcParams {
  int32_t has_bias;
  int32_t fused_relu; /* apply relu to y */
} FrFcParams;
/* fc_backward: in {dy [M,N], x [M,K], w [N,K], y [M,N] (post-relu output, only with relu_mask)}.
 * part 0 (whole): out {dw [N,K], db [N] (if has_bias), dx [M,K] (if need_dx)};
 * part 1 (input gradient): out {dx}; part 2 (weight gradient): out {dw, db (if has_bias)}, dy read as given.
 * Splitting lets the weight gradient run on a second stream beside the rest of backward.
 * Gradients are written (not accumulated).
 * relu_mask: the fc was fused with a following relu; dy is the gradient w.r.t. the relu output and the kernel
 * first zeroes it, in place, where y <= 0. */
typedef struct FrFcBackwardParams {
  int32_t has_bias;
  int32_t need_dx;
  int32_t relu_mask;
  int32_t part; /* 0 whole, 1 input gradient, 2 weight gradient */
} FrFcBackwardParams;

/* relu: in {x}; out {y}. relu_backward: in {dy, y}; out {dx}. No params.
 * Gradient sums (CompileOptions::grad_sums): relu_backward may take two more inputs, x [.., C] (dx's size and
 * dtype) and save_mean [C] (f32), and then writes a second output gsums (f32 [2C]): gsums[c] = the sum over
 * the rows of dx[.., c] as stored, gsums[C + c] = the sum of dx[.., c] (x[.., c] - save_mean[c]) (in double,
 * rounded to f32 once): the two sums the backward of the batchnorm that computed x's normalisation needs,
 * when dx is that batchnorm's output gradient. add_relu_backward takes the same two inputs after y. A second
 * pair (x2, save_mean2) after the first adds a third output, gsums2, the same sums for x2 (a join whose two
 * branches each end in a batchnorm). batchnorm_backward without a fused relu may then take gsums as a sixth
 * input and skips its own pass over dy and x. Kernels that implement these operands declare
 * FR_KERNEL_SUMS_OPERANDS (plugin.h). */

/* dropout: in {x}; out {y}, rin {step scalars}. dropout_backward: in {dy}; out {dx}, rin {step scalars}.
 * The mask is a pure function of (seed, layer_id, step, element index): nothing is stored. */
typedef struct FrDropoutParams {
  float p;
  uint32_t layer_id;
} FrDropoutParams;

/* normalize_input: in {x u8 [M,H,W,C], labels i32 [M] (optional)}; out {y f32 [M,H,W,C], labels i32 [M]
 * (optional)}; y = (x/255 - mean[c]) / std[c]; with the optional pair the batch's labels are copied in the
 * same pass. */
#define FR_MAX_NORM_CHANNELS 4
typedef struct FrNormalizeParams {
  int32_t channels;
  float mean[FR_MAX_NORM_CHANNELS];
  float std[FR_MAX_NORM_CHANNELS];
} FrNormalizeParams;

/* softmax_xent: in {logits [M,C], labels i32 [M]}; out {dlogits [M,C] (if write_grad)};
 * rout {batch results (FrBatchResults)}. Mean reduction over the batch, PyTorch label smoothing. */
typedef struct FrSoftmaxXentParams {
  float label_smoothing;
  int32_t write_grad;
} FrSoftmaxXentParams;

/* fc_softmax_xent (the training head in one node: CompileOptions::fuse_head): in {x [M,K], w [N,K], labels
 * [M] i32, b [N] (if has_bias)}; out {logits [M,N], dlogits [M,N], dx [M,K]}; rin {step scalars} (optional:
 * the loss scale, as softmax_xent); rout {batch results}. logits = x w^T + b; loss, hits and dlogits as
 * softmax_xent with write_grad; dx = dlogits w, then zeroed where x <= 0 when mask_input (x is the output of
 * the previous layer's fused relu, whose backward then leaves dy as it is). N <= 32. The numbers are those of
 * the nodes it replaces: fc, softmax_xent, fc_backward part 1, the previous fc_backward's relu mask. */
typedef struct FrFcSoftmaxXentParams {
  int32_t has_bias;
  int32_t mask_input;
  float label_smoothing;
  int32_t pad_;
} FrFcSoftmaxXentParams;
#define FR_FC_SOFTMAX_XENT_MAX_CLASSES 32

/* Per-batch results written by the loss kernel (R region). */
typedef struct FrBatchResults {
  float loss;    /* mean loss of the batch */
  float correct; /* top-1 hits in the batch */
  float samples; /* batch size */
  float pad_;
} FrBatchResults;

/* Accumulators of one pass (R region), cleared by `clear`, summed by accumulate_metrics. */
typedef struct FrMetricAccumulators {
  double loss_sum; /* sum over batches of loss * samples */
  double correct;
  double samples;
  double batches;
} FrMetricAccumulators;

/* ---- convolutional-network ops (issue: CNNs). Tensors are NHWC; conv weights are [K, R, S, C/groups]
 * (out channels, kernel height, kernel width, input channels per group), i.e. PyTorch's [K, C/g, R, S] with
 * the input-channel axis moved last. Output size P = (H + 2*pad_h - dil_h*(R-1) - 1) / stride_h + 1 (floor),
 * same for Q. */
typedef struct FrConvParams {
  int32_t kh, kw;
  int32_t stride_h, stride_w;
  int32_t pad_h, pad_w;
  int32_t dil_h, dil_w;
  int32_t groups;
  int32_t has_bias;
} FrConvParams;
/* conv2d: in {x [N,H,W,C], w [K,R,S,C/g], b [K] (if has_bias)}; out {y [N,P,Q,K]}. Without a bias it may
 * take a second output, sums (f32, 2K elements): sums[k] = the sum over N, P, Q of y[.., k] and sums[K + k]
 * the sum of its squares, of y as stored, accumulated in at least f32 (the statistics of a batchnorm that
 * reads y; CompileOptions::conv_stats).
 * conv2d_backward: in {dy [N,P,Q,K], x, w}; part 0 (whole): out {dw, db (if has_bias), dx (if need_dx)};
 * part 1 (input gradient): out {dx}; part 2 (weight gradient): out {dw, db (if has_bias)}. Splitting lets the
 * weight gradient run on a second stream beside the rest of backward. Written, not accumulated. */
/* Batchnorm prologue (CompileOptions::conv_prologue): conv2d may take four more inputs after its plain ones
 * (x, w and, with has_bias, b): gamma, beta, save_mean, save_invstd (f32 [C], C = x's channels) of the
 * training batchnorm with fused relu that x feeds. x is then that batchnorm's INPUT: the kernel writes
 * a = relu(fma(x, scale, shift)) rounded to x's dtype, with scale = gamma * save_invstd and shift =
 * fma(-save_mean, scale, beta) in f32 (each rounded once), into its second output (x's shape and dtype: the
 * batchnorm's output, which the conv's backward and the batchnorm's backward then read as usual), and
 * convolves a (the padding zero). The sums output, when asked, comes third. The batchnorm itself runs in its
 * statistics-only form (below). Kernels that implement these forms declare FR_KERNEL_CONV_PROLOGUE
 * (plugin.h); the runtime refuses nodes that use them on other kernels.
 * Join prologue (FR_KERNEL_CONV_JOIN_PROLOGUE with FR_KERNEL_CONV_PROLOGUE; CompileOptions::join_prologue):
 * the batchnorm prologue with a fifth operand after the four, r (x's shape and dtype): the batchnorm is
 * then one a residual join computes (batchnorm_add with its relu, below) and r the join's other branch; the
 * kernel writes a = relu(fma(x, scale, shift) + r) (the sum in f32, rounded once to x's dtype: the values
 * batchnorm_add would store) into its second output and convolves a. batchnorm_add then runs as a
 * batchnorm in its statistics-only form.
 * Batchnorm gradient epilogue (the same flag; CompileOptions::grad_sums with conv_prologue): a
 * conv2d_backward call that writes dx (part 1, or part 0 with need_dx) may take five more inputs after {dy,
 * x, w}: bx, gamma, beta, save_mean, save_invstd, where x is the output of a training batchnorm with fused
 * relu (the prologue's applied map, read by this conv only) and bx that batchnorm's input (x's shape and
 * dtype; the four f32 [C]). dx is then written masked by the relu, dx * (x > 0) as the batchnorm's backward
 * would mask it (a backend may recompute x > 0 from bx as for batchnorm_backward's beta input), and one more
 * output, last, gsums (f32 [2C]), gets the batchnorm's two gradient sums of that masked dx as in
 * "Gradient sums" above, with bx as x: the batchnorm's backward then takes dy premasked, with gsums.
 * Batchnorm gradient prologue of the weight gradient (FR_KERNEL_WGRAD_BN_PROLOGUE; CompileOptions::
 * conv_prologue with grad_sums, at the first layer): a conv2d_backward call that writes no dx (part 2, or
 * part 0 without need_dx) may take five more inputs after {dy, x, w}: y, gamma, save_mean, save_invstd,
 * gsums, where y is the conv's output (dy's shape and dtype), read only by a training batchnorm with those
 * parameters and statistics (f32 [K]), dy is that batchnorm's output gradient, premasked, and gsums (f32
 * [2K]) its two gradient sums ("Gradient sums" above). The call then takes as its output gradient what that
 * batchnorm's backward would write as dx: a (dy - b - (y - mean) k) rounded to y's dtype, with a = gamma
 * invstd, b = gsums[c] / n and k = gsums[K + c] invstd invstd / n (n = N P Q; in double, each rounded once
 * to f32). The batchnorm's backward runs in its weights-only form (below).
 * Join epilogue (FR_KERNEL_CONV_JOIN_EPILOGUE; CompileOptions::join_epilogue): a conv2d_backward call that
 * writes dx may take three more inputs after {dy, x, w}: b, bx, save_mean, where x (the conv's input) is a
 * relu's output that one more layer reads, b that layer's gradient part (x's shape and dtype), bx the input
 * of the training batchnorm whose output gradient the two parts make (x's shape and dtype) and save_mean its
 * saved mean (f32 [C]). dx is then written as add_relu_backward (a = the conv's own input gradient rounded to
 * x's dtype, b, y = x) would write it: a + b in f32 where x > 0, else 0, rounded once; and one more output,
 * last, gsums (f32 [2C]), gets that batchnorm's two gradient sums of dx, as add_relu_backward's gradient
 * sums with bx as their x.
 * Compact input gradient (FR_KERNEL_COMPACT_GRAD; CompileOptions::compact_shortcut_grads): a part-1 call of
 * a 1x1 conv with padding 0, dilation 1 and one group (a projection shortcut, typically stride 2) may write
 * dx as [N, P, Q, C] (dy's positions, x's channels and dtype) instead of x's shape: dx[n, p, q, c] = the sum
 * over k of dy[n, p, q, k] w[k, c], the gradient at x's position (n, p stride_h, q stride_w), the only
 * positions the conv reads (every other position of x gets no gradient from it). The kernel tells the form
 * by dx's size; add_relu_backward's compact part (below) is its reader. */
typedef struct FrConvBackwardParams {
  FrConvParams conv;
  int32_t need_dx;
  int32_t part; /* 0 whole, 1 input gradient, 2 weight gradient; earlier headers named this pad_ (always 0) */
} FrConvBackwardParams;

/* batchnorm (per channel C of NHWC), PyTorch BatchNorm2d semantics:
 * training: in {x, gamma [C], beta [C]}; out {y, save_mean [C], save_invstd [C]}; rout {running_mean,
 * running_var} (f32 [C] each): batch mean/biased var normalise; running stats move by momentum with the
 * UNBIASED variance. inference: in {x, gamma, beta, running_mean, running_var}; out {y}. batchnorm_backward:
 * in {dy, x, gamma, save_mean, save_invstd}; out {dx, dgamma, dbeta}.
 * relu = 1 fuses a following relu: y = max(bn(x), 0); batchnorm_backward then takes a sixth input, that y,
 * and uses dy * (y > 0) as the incoming gradient. It may also get a seventh, beta [C] (f32): a backend whose
 * forward computes y = relu(fma(x, scale, shift)) with scale = gamma * save_invstd and shift =
 * fma(-save_mean, scale, beta) in f32 (each rounded once) may then recompute y > 0 from x instead of
 * reading y (the CUDA backend does; the same mask bit for bit).
 * Training batchnorm may take a fourth input (batchnorm_add a fifth): sums (f32, 2C), the per-channel sum and
 * sum of squares of x that the conv2d writing x produced. It then skips its own pass over x: mean = (float)
 * (sum / n) and the biased variance max(sumsq / n - mean^2, 0), in double from those f32 sums, instead of
 * its own statistics. A kernel that implements these sums operands declares FR_KERNEL_SUMS_OPERANDS
 * (plugin.h); the runtime refuses nodes that use them on other kernels.
 * Batchnorm prologue form (FR_KERNEL_CONV_PROLOGUE): a training batchnorm with two outputs {save_mean,
 * save_invstd} (no y) computes the statistics and moves the running statistics only; the conv2d that reads
 * it applies it and writes y (above).
 * Weights-only backward (FR_KERNEL_WGRAD_BN_PROLOGUE): batchnorm_backward with gsums (six inputs, no fused
 * relu) and two outputs {dgamma, dbeta} writes no dx: the weight gradient of the conv2d that wrote x applies
 * it (conv2d_backward's batchnorm gradient prologue, above). */
/* batchnorm_add (training only): a batchnorm whose only reader is a residual join, computed by the join:
 * in {x, gamma, beta, r} (r: the join's other branch, x's shape and dtype; a fifth input may be the sums of
 * x, as for batchnorm); out {y, save_mean, save_invstd};
 * rout {running_mean, running_var}; y = bn(x) + r, then max(y, 0) with params.relu (the join's relu). The
 * statistics and running statistics are batchnorm's; the backward is batchnorm_backward without a relu input
 * (its dy is the join's masked gradient). The batchnorm's own output is never stored.
 * Subsampled output (FR_KERNEL_SUBSAMPLED_OUTPUT; CompileOptions::subsampled_shortcuts): a fourth output
 * y2 [N, (H + 1) / 2, (W + 1) / 2, C] (y's dtype) gets y's values at the even rows and columns, y2[n, p, q,
 * c] = y[n, 2p, 2q, c]: the positions a 1x1 stride-2 projection shortcut reads, which then reads y2 at
 * stride 1. */
typedef struct FrBatchNormParams {
  float eps;      /* 1e-5 */
  float momentum; /* 0.1 */
  int32_t training;
  int32_t relu; /* 0 or 1 (fused relu); earlier headers named this field pad_ and always passed 0 */
} FrBatchNormParams;

/* The folded inference form of batchnorm (UPDATE_BN_INF_PARAMS, once before an evaluation pass):
 * batchnorm_fold: in {gamma, beta, running_mean, running_var} (f32 [C]); out {scale, shift} (f32 [C]);
 * params FrBatchNormParams (eps): scale = gamma / sqrt(running_var + eps), shift = beta - running_mean *
 * scale (fr_bn_fold in batchnorm_rules.h). channel_affine: in {x [.., C], scale [C], shift [C]}; out {y} (x's
 * dtype, may alias x): y = x * scale[c] + shift[c], then max(y, 0) with params.relu (FrChannelAffineParams).
 */
typedef struct FrChannelAffineParams {
  int32_t relu;
  int32_t pad_;
} FrChannelAffineParams;

/* max_pool2d / avg_pool2d: in {x [N,H,W,C]}; out {y [N,P,Q,C]} (P, Q as for conv with dilation 1).
 * max_pool2d_backward: in {dy, x, y}; out {dx} (the gradient goes to the first maximum in window order).
 * avg_pool2d_backward: in {dy}; out {dx} (count_include_pad: divisor kh*kw, PyTorch's default).
 * global_avg_pool: in {x}; out {y [N,1,1,C]}; global_avg_pool_backward: in {dy}; out {dx}. No params. */
typedef struct FrPoolParams {
  int32_t kh, kw;
  int32_t stride_h, stride_w;
  int32_t pad_h, pad_w;
} FrPoolParams;

/* add: in {a, b}; out {y = a + b} (residual joins and gradient sums). No params.
 * add_relu_backward: in {a, b, y}; out {dx = (a + b) * (y > 0)}: relu_backward of a gradient that arrives in
 * two parts (a fused join whose output two layers read), without materialising the sum. No params, or
 * FrAddReluBackwardParams for a compact second part (FR_KERNEL_COMPACT_GRAD): b is then [N, P, Q, C] with
 * P = (H - 1) / stride_h + 1 and Q = (W - 1) / stride_w + 1 (a's [N, H, W, C]; conv2d_backward's compact
 * input gradient), and dx = (a + b[n, h / stride_h, w / stride_w, c]) * (y > 0) where h and w are multiples
 * of the strides, (a + 0) * (y > 0) elsewhere: the bits of the full-size part, whose other positions hold
 * +0 (so a -0 in a comes out +0 as there). The gradient sums operands are as without params. add_relu:
 * in {a, b}; out {y = max(a + b, 0)} (a residual join followed by relu). No params; its backward is
 * relu_backward on y.
 * concat: in {a [N,H,W,Ca], b [N,H,W,Cb]}; out {y [N,H,W,Ca+Cb]}: per position, a's channels then b's.
 * concat_backward: in {dy [N,H,W,Ca+Cb]}; out {da, db} (the split). No params.
 * gelu: in {x}; out {y = x * Phi(x)} (exact, erf). gelu_backward: in {dy, x}; out {dx}. No params.
 * silu: in {x}; out {y = x * sigmoid(x)}. silu_backward: in {dy, x}; out {dx}. No params.
 * sigmoid: in {x}; out {y = 1 / (1 + exp(-x))}. sigmoid_backward: in {dy, y}; out {dx = dy y (1 - y)}.
 * tanh: in {x}; out {y = tanh x}. tanh_backward: in {dy, y}; out {dx = dy (1 - y^2)}. No params.
 * flatten_chw: in {x [N,H,W,C]}; out {y [N,1,1,C*H*W]} in PyTorch's C,H,W order; flatten_chw_backward: in
 * {dy}; out {dx [N,H,W,C]}. No params. */
typedef struct FrAddReluBackwardParams {
  int32_t stride_h, stride_w; /* the compact part b's strides, each >= 1 (1 and 1: b is a's size) */
} FrAddReluBackwardParams;

/* ---- range ops --------------------------------------------------------------------------------------------
 */
/* clear: rout {r}: every byte of r set to zero. No params. */
/* copy: rin {src}; rout {dst} (same bytes). No params. */
/* accumulate_metrics: rin {FrBatchResults}; rout {FrMetricAccumulators}. No params. */

/* lr_schedule: rout {FrStepScalars}; rin {lr table (f32), only for FR_SCHED_TABLE}.
 * Writes lr for the step about to be taken (index = step), then the optimizer reads it; step is advanced by
 * the optimizer_step_done op at the end of OPTIMIZER. */
typedef enum FrSchedKind { FR_SCHED_CONSTANT = 0, FR_SCHED_COSINE = 1, FR_SCHED_TABLE = 2 } FrSchedKind;
typedef struct FrScheduleParams {
  int32_t kind;
  int32_t warmup_steps; /* linear warm-up from base_lr/warmup_steps to base_lr over this many steps */
  int32_t total_steps;  /* cosine: steps from the start of training to the end */
  float base_lr;
  float min_lr;
  int32_t table_len;
} FrScheduleParams;

/* step_done: rout {FrStepScalars}; rin {lr table (f32), only for FR_SCHED_TABLE}; params FrScheduleParams or
 * none. step += 1, then (with params) lr = the schedule's lr for the new step, so one node ends OPTIMIZER and
 * the next step needs no lr_schedule node (the host writes the lr of step 0 at compile time). */

/* sgd_update: rout {w, momentum buffer[, weight copy]}; rin {g, FrStepScalars[, momentum table]}. PyTorch SGD
 * (dampening 0); without momentum (params.momentum 0) the buffer may be left out (rout {w[, weight copy]}),
 * and one passed is left alone.
 * The optional third range input (FR_KERNEL_STEP_MOMENTUM) is a table of f32 momenta, one per step: the step
 * being taken uses fr_step_value(table, its length, step) instead of params.momentum (which is then only
 * non-zero, so the buffer exists).
 * The optional weight copy (FR_KERNEL_WEIGHT_COPY; CompileOptions::fused_weight_cast): the last range output
 * when it is f16 or bf16, with as many elements as w, mixed precision's compute copy (the A region): every
 * element of w as it stands after the step (updated, or as it was on a skipped step) rounded as cast_range
 * rounds it, the bits the W -> A cast_range after the update would write. adam_update takes it the same way.
 * The 16-bit gradients (FR_KERNEL_HALF_GRADS; CompileOptions::update_from_grads16): g may be an f16 or bf16
 * range with as many elements as w (mixed precision's G16); each gradient is then float(g) * (1 / loss_scale)
 * (loss_scale from the step scalars), the products unscale_grads' cast form stores, in registers: the same
 * update as cast (and unscale) to f32 first. adam_update takes it the same way.
 * The backups (FR_KERNEL_UPDATE_BACKUPS; CompileOptions::speculative_update, whose updates run before the
 * step's last gradient check): with params.backups 1 the range outputs end with one backup per f32 range the
 * update writes (w, then the buffer when it has one; adam_update: w, m, v), after the weight copy if any,
 * each of its range's bytes (any dtype: a byte copy); every f32 value as it was before this step goes into
 * its backup, on a skipped step too, so that restore_if_skipped (below) can put it back.
 */
typedef struct FrSgdParams {
  float momentum;
  float weight_decay;
  int32_t nesterov;
  int32_t backups; /* 0 or 1; earlier headers named this pad_ (always 0) */
} FrSgdParams;

/* lars_update: rout {w, momentum buffer}; rin {g, FrStepScalars[, momentum table]}, the range ONE parameter
 * tensor (its trust ratio is the tensor's). LARS as facebookresearch's Barlow Twins / VICReg LARS writes it
 * (the 1-D parameters it excludes are updated by sgd_update with weight decay 0): d = g + weight_decay w;
 * q = eta ||w|| / ||d|| where both norms are above 0, else 1 (norms over the tensor, added in double in a
 * fixed order, q rounded once to f32); buf = momentum buf + q d; w -= lr buf. The optional momentum table
 * as sgd_update's (FR_KERNEL_STEP_MOMENTUM). */
typedef struct FrLarsParams {
  float momentum;
  float weight_decay;
  float eta; /* the trust coefficient, 0.001 in the papers' recipes */
  int32_t pad_;
} FrLarsParams;

/* adam_update: rout {w, m, v[, weight copy]}; rin {g, FrStepScalars[, beta1 table]}. PyTorch Adam
 * (decoupled=0) or AdamW (decoupled=1), bias correction with t = updates + 1. The optional third range input
 * (FR_KERNEL_STEP_MOMENTUM) gives beta1 per step, as sgd_update's momentum table: the step's beta1 then
 * serves both the first moment and its bias correction, as PyTorch's Adam reads betas[0] every step. */
typedef struct FrAdamParams {
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  int32_t decoupled;
  int32_t backups; /* 0 or 1 (sgd_update's backups); earlier headers named this pad_ (always 0) */
} FrAdamParams;

/* check_grads (range): rout {step scalars}; rin {gradients (f32, f16 or bf16)}: skip_step = 1 when any
 * float(g) * (1 / loss_scale) is inf or NaN, the test unscale_grads makes, without storing anything (fp16's
 * check of the 16-bit gradients that the updates read themselves, CompileOptions::update_from_grads16). */

/* restore_if_skipped (range; fp16's speculative update, CompileOptions::speculative_update): rin {G groups
 * of `per_group` sources, then FrStepScalars}; rout {G groups of `per_group` destinations, each group
 * followed by a 16-bit weight copy when `weight_copy` is 1}. When skip_step is set, every destination is
 * its source byte for byte (the same bytes, any dtype) and a group's weight copy is its first destination
 * (f32) cast to the copy's dtype, the bits cast_range gives; when it is clear, nothing is written. The
 * updates that ran before the step's last gradient check are undone on a skipped step: their weights,
 * buffers and 16-bit copies become what they were before the step. */
typedef struct FrRestoreParams {
  int32_t per_group;   /* >= 1 */
  int32_t weight_copy; /* 0 or 1 */
} FrRestoreParams;

/* Op names (a kernel table entry names one of these, or an op library's own). */
#define FR_OP_FC "fc"
#define FR_OP_FC_BACKWARD "fc_backward"
#define FR_OP_RELU "relu"
#define FR_OP_RELU_BACKWARD "relu_backward"
#define FR_OP_DROPOUT "dropout"
#define FR_OP_DROPOUT_BACKWARD "dropout_backward"
#define FR_OP_NORMALIZE_INPUT "normalize_input"
#define FR_OP_SOFTMAX_XENT "softmax_xent"
#define FR_OP_FC_SOFTMAX_XENT "fc_softmax_xent"
#define FR_OP_CLEAR "clear"
#define FR_OP_COPY "copy"
#define FR_OP_ACCUMULATE_METRICS "accumulate_metrics"
#define FR_OP_LR_SCHEDULE "lr_schedule"
#define FR_OP_STEP_DONE "step_done"
#define FR_OP_SGD_UPDATE "sgd_update"
#define FR_OP_ADAM_UPDATE "adam_update"
#define FR_OP_CONV2D "conv2d"
#define FR_OP_CONV2D_BACKWARD "conv2d_backward"
#define FR_OP_BATCHNORM "batchnorm"
#define FR_OP_BATCHNORM_BACKWARD "batchnorm_backward"
#define FR_OP_BATCHNORM_ADD "batchnorm_add"
#define FR_OP_BATCHNORM_FOLD "batchnorm_fold"
#define FR_OP_CHANNEL_AFFINE "channel_affine"
#define FR_OP_MAX_POOL2D "max_pool2d"
#define FR_OP_MAX_POOL2D_BACKWARD "max_pool2d_backward"
#define FR_OP_AVG_POOL2D "avg_pool2d"
#define FR_OP_AVG_POOL2D_BACKWARD "avg_pool2d_backward"
#define FR_OP_GLOBAL_AVG_POOL "global_avg_pool"
#define FR_OP_GLOBAL_AVG_POOL_BACKWARD "global_avg_pool_backward"
#define FR_OP_ADD "add"
#define FR_OP_ADD_RELU "add_relu"
#define FR_OP_ADD_RELU_BACKWARD "add_relu_backward"
#define FR_OP_CONCAT "concat"
#define FR_OP_CONCAT_BACKWARD "concat_backward"
#define FR_OP_GELU "gelu"
#define FR_OP_GELU_BACKWARD "gelu_backward"
#define FR_OP_SILU "silu"
#define FR_OP_SILU_BACKWARD "silu_backward"
#define FR_OP_SIGMOID "sigmoid"
#define FR_OP_SIGMOID_BACKWARD "sigmoid_backward"
#define FR_OP_TANH "tanh"
#define FR_OP_TANH_BACKWARD "tanh_backward"
#define FR_OP_FLATTEN_CHW "flatten_chw"
#define FR_OP_FLATTEN_CHW_BACKWARD "flatten_chw_backward"
/* cast (compute): in {x}; out {y} of the same element count; y = x converted to y's dtype (f32, f16, bf16;
 * rounding to nearest even). Mixed precision inserts it where an fp32 layer (fc, the loss) meets
 * low-precision maps, forward and backward. cast_range (range): rin {src}; rout {dst}; dst = src converted
 * element by element. The element count is dst.bytes / sizeof(dst dtype) and must equal src.bytes /
 * sizeof(src dtype) (the slot rule keeps an FP32 range exactly twice its FP16 twin): the master-weight ->
 * compute-weight cast (W -> A) and the gradient cast (G16 -> G). */
#define FR_OP_CAST "cast"
#define FR_OP_UNSCALE_GRADS "unscale_grads"
#define FR_OP_CHECK_GRADS "check_grads"
#define FR_OP_LOSS_SCALE_UPDATE "loss_scale_update"
#define FR_OP_CAST_RANGE "cast_range"
#define FR_OP_EMA_UPDATE "ema_update"
#define FR_OP_LARS_UPDATE "lars_update"
#define FR_OP_RESTORE_IF_SKIPPED "restore_if_skipped"
/* allreduce_mean (range, collective; ABI 1.1): rout {x (f32)}, no params; needs FrCall.comm. Every rank of
 * the group calls it with a range of the same bytes, and each gets the mean over ranks in place, the same
 * bits on every rank whatever the timing: the cpu plugin's "threads" adds the ranks' values in rank order
 * (rank 0's first) and multiplies by 1 / world (a float, rounded once); "nccl" is ncclAllReduce with
 * ncclAvg. The gradient all-reduce of data parallelism (DESIGN §10). */
#define FR_OP_ALLREDUCE_MEAN "allreduce_mean"

/* Philox streams ("purpose" of a draw), so different uses of one seed never correlate. */
typedef enum FrRandomPurpose {
  FR_RNG_INIT = 1,
  FR_RNG_SHUFFLE = 2,
  FR_RNG_DROPOUT = 3,
  FR_RNG_AUGMENT = 4
} FrRandomPurpose;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_OPS_H_ */
