/* Batchnorm's folded inference form, shared by every backend (C99, usable from C++ and CUDA), so CPU and GPU
 * fold to the same numbers: y = x * scale + shift with scale = gamma / sqrt(running_var + eps), evaluated in
 * double and rounded once, and shift = beta - running_mean * scale. */
#ifndef FRESCO_BATCHNORM_RULES_H_
#define FRESCO_BATCHNORM_RULES_H_

#include <math.h>

#include "fresco/philox.h" /* FR_HD */

#ifdef __cplusplus
extern "C" {
#endif

/* scale = gamma / sqrt(var + eps) in double, rounded once (also batchnorm's inference scale on the CPU). */
FR_HD float fr_bn_fold_scale(float gamma, float var, float eps) {
  return (float)((double)gamma / sqrt((double)var + (double)eps));
}

FR_HD void fr_bn_fold(float gamma, float beta, float mean, float var, float eps, float* scale, float* shift) {
  const float s = fr_bn_fold_scale(gamma, var, eps);
  *scale = s;
  *shift = beta - mean * s;
}

/* A training batchnorm's batch mean and biased variance from the per-channel sum and sum of squares of x over
 * n values (the f32 sums a conv2d writes, ops.h, or a backend's own double sums): mean = (float)(sum / n),
 * var = max(sumsq / n - mean^2, 0) in double, mean as rounded. */
FR_HD void fr_bn_stats_from_sums(double sum, double sumsq, double n, float* mean, double* var) {
  const float m = (float)(sum / n);
  const double v = sumsq / n - (double)m * (double)m;
  *mean = m;
  *var = v > 0.0 ? v : 0.0;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_BATCHNORM_RULES_H_ */
