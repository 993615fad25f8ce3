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
  int32_t pad_;
} FrStepScalars;

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

/* relu: in {x}; out {y}. relu_backward: in {dy, y}; out {dx}. No params. */

/* dropout: in {x}; out {y}, rin {step scalars}. dropout_backward: in {dy}; out {dx}, rin {step scalars}.
 * The mask is a pure function of (seed, layer_id, step, element index): nothing is stored. */
typedef struct FrDropoutParams {
  float p;
  uint32_t layer_id;
} FrDropoutParams;

/* normalize_input: in {x u8 [M,H,W,C], labels i32 [M] (optional)}; out {y f32 [M,H,W,C], labels i32 [M] (optional)};
 * y = (x/255 - mean[c]) / std[c]; with the optional pair the batch's labels are copied in the same pass. */
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

/* step_done: rout {FrStepScalars}; rin {lr table (f32), only for FR_SCHED_TABLE}; params FrScheduleParams or none.
 * step += 1, then (with params) lr = the schedule's lr for the new step, so one node ends OPTIMIZER and the
 * next step needs no lr_schedule node (the host writes the lr of step 0 at compile time). */

/* sgd_update: rout {w, momentum buffer}; rin {g, FrStepScalars}. PyTorch SGD (dampening 0). */
typedef struct FrSgdParams {
  float momentum;
  float weight_decay;
  int32_t nesterov;
  int32_t pad_;
} FrSgdParams;

/* adam_update: rout {w, m, v}; rin {g, FrStepScalars}. PyTorch Adam (decoupled=0) or AdamW (decoupled=1),
 * bias correction with t = step + 1. */
typedef struct FrAdamParams {
  float beta1;
  float beta2;
  float eps;
  float weight_decay;
  int32_t decoupled;
  int32_t pad_;
} FrAdamParams;

/* Op names (a kernel table entry names one of these, or an op library's own). */
#define FR_OP_FC "fc"
#define FR_OP_FC_BACKWARD "fc_backward"
#define FR_OP_RELU "relu"
#define FR_OP_RELU_BACKWARD "relu_backward"
#define FR_OP_DROPOUT "dropout"
#define FR_OP_DROPOUT_BACKWARD "dropout_backward"
#define FR_OP_NORMALIZE_INPUT "normalize_input"
#define FR_OP_SOFTMAX_XENT "softmax_xent"
#define FR_OP_CLEAR "clear"
#define FR_OP_COPY "copy"
#define FR_OP_ACCUMULATE_METRICS "accumulate_metrics"
#define FR_OP_LR_SCHEDULE "lr_schedule"
#define FR_OP_STEP_DONE "step_done"
#define FR_OP_SGD_UPDATE "sgd_update"
#define FR_OP_ADAM_UPDATE "adam_update"

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
