/* Element-wise update rules shared by every backend (C99, usable from C++ and CUDA): the learning-rate
 * schedule and the SGD / Adam / AdamW steps exactly as PyTorch defines them, so CPU and GPU kernels compute
 * the same numbers. Tested through tests/plugins/cpu/test_optimizers.cpp and test_range_ops.cpp. */
#ifndef FRESCO_UPDATE_RULES_H_
#define FRESCO_UPDATE_RULES_H_

#include <math.h>

#include "fresco/ops.h"
#include "fresco/philox.h" /* FR_HD */

#ifdef __cplusplus
extern "C" {
#endif

/* The value of a per-step table (len >= 1 floats) for the step with 0-based index `step`: its last value
 * past its end. */
FR_HD float fr_step_value(const float* table, int64_t len, int32_t step) {
  return table[step < 0 ? 0 : step < len ? step : len - 1];
}

/* lr for the step with 0-based index `step`: constant or cosine with linear warm-up, or a table. */
FR_HD float fr_schedule_lr(const FrScheduleParams* p, int32_t step, const float* table) {
  if (p->kind == FR_SCHED_TABLE)
    return p->table_len > 0 ? fr_step_value(table, p->table_len, step) : p->base_lr;
  if (step < p->warmup_steps) return p->base_lr * (float)(step + 1) / (float)p->warmup_steps;
  if (p->kind == FR_SCHED_COSINE) {
    const int32_t span = p->total_steps - p->warmup_steps;
    const int32_t done = step - p->warmup_steps < span ? step - p->warmup_steps : span;
    const double t = span > 0 ? (double)done / (double)span : 1.0;
    return (float)(p->min_lr + (p->base_lr - p->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * t)));
  }
  return p->base_lr;
}

/* ema_update's rule (ops.h): torch.lerp(e, w, weight) as PyTorch computes it (weight = 1 - decay). */
FR_HD float fr_ema_step(float e, float w, float weight) {
  return weight < 0.5f ? e + weight * (w - e) : w - (w - e) * (1.0f - weight);
}
/* 0: leave E; 1: copy W (the first average); 2: average (ema_update after step `step`). */
FR_HD int fr_ema_action(int32_t step, int32_t every) {
  if (every < 1 || (step + 1) % every != 0) return 0;
  return step + 1 == every ? 1 : 2;
}

/* End of a training step: one more step; one more applied update unless the optimizers skipped it. */
FR_HD void fr_step_done(FrStepScalars* s) {
  s->step += 1;
  if (!s->skip_step) s->updates += 1;
  s->skip_step = 0; /* a skipped step (loss scaling) has been accounted for */
}

/* PyTorch GradScaler.update after a step whose gradients were unscaled (skip_step set when any was inf/NaN):
 * back off and reset the tracker on a skipped step, else grow after growth_interval clean steps. */
FR_HD void fr_loss_scale_update(FrStepScalars* s, const FrLossScaleParams* p) {
  if (s->skip_step) {
    s->loss_scale *= p->backoff;
    s->growth_tracker = 0;
  } else if (++s->growth_tracker >= p->growth_interval) {
    s->loss_scale *= p->growth;
    s->growth_tracker = 0;
  }
}

/* PyTorch SGD (dampening 0): d = g + wd*w; buf = mom*buf + d; d = nesterov ? d + mom*buf : buf; w -= lr*d. */
FR_HD void fr_sgd_step(float* w, float* buf, float g, float lr, float wd, float mom, int nesterov) {
  float d = g + wd * *w;
  if (buf) {
    *buf = mom * *buf + d;
    d = nesterov ? d + mom * *buf : *buf;
  }
  *w -= lr * d;
}

/* LARS's trust ratio from the tensor's norms ||w|| and ||g + wd w|| (ops.h, lars_update), rounded once. */
FR_HD float fr_lars_trust(double w_norm, double d_norm, float eta) {
  return w_norm > 0.0 && d_norm > 0.0 ? (float)((double)eta * w_norm / d_norm) : 1.0f;
}
/* One element of LARS's step with trust ratio q (PyTorch-style momentum without dampening). */
FR_HD void fr_lars_step(float* w, float* buf, float g, float lr, float wd, float mom, float q) {
  const float d = (g + wd * *w) * q;
  *buf = mom * *buf + d;
  *w -= lr * *buf;
}

/* Per-step constants of Adam: step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t), t = step + 1. */
typedef struct FrAdamStepConsts {
  float lr, step_size, bc2_sqrt;
} FrAdamStepConsts;

FR_HD FrAdamStepConsts fr_adam_consts(const FrAdamParams* p, float lr, int32_t step) {
  const double t = (double)step + 1.0;
  FrAdamStepConsts k;
  k.lr = lr;
  k.step_size = (float)(lr / (1.0 - pow((double)p->beta1, t)));
  k.bc2_sqrt = (float)sqrt(1.0 - pow((double)p->beta2, t));
  return k;
}

/* PyTorch Adam (L2 decay added to g) or AdamW (decoupled decay), single-tensor form:
 * m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g*g; w -= step_size * m / (sqrt(v)/bc2_sqrt + eps). */
FR_HD void fr_adam_step(float* w, float* m, float* v, float g, const FrAdamParams* p, FrAdamStepConsts k) {
  if (p->decoupled)
    *w *= 1.0f - k.lr * p->weight_decay;
  else
    g += p->weight_decay * *w;
  *m += (1.0f - p->beta1) * (g - *m);
  *v = p->beta2 * *v + (1.0f - p->beta2) * g * g;
  const float denom = sqrtf(*v) / k.bc2_sqrt + p->eps;
  *w -= k.step_size * (*m / denom);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_UPDATE_RULES_H_ */
