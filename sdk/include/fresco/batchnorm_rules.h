/* Batchnorm's rules shared by every backend (C99, usable from C++ and CUDA), so CPU and GPU compute the same
 * numbers: the batch statistics from sums and the backward's coefficients (below), and the folded inference
 * form: y = x * scale + shift with scale = gamma / sqrt(running_var + eps), evaluated in
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

/* A training batchnorm's backward from the two gradient sums of its output gradient g over n values
 * (sum g, sum g (x - mean)): dx = a (g - b - (x - mean) k) with a = gamma invstd, b = sum g / n and
 * k = dgamma invstd / n, dgamma = sum g (x - mean) invstd, dbeta = sum g; in double, each rounded once to
 * f32. Every backend's batchnorm_backward and the convolutions that apply its dx themselves (ops.h, the
 * batchnorm gradient prologue) use it, so they give the same bits. */
typedef struct FrBnGradCoefficients {
  float a, b, k, dgamma, dbeta;
} FrBnGradCoefficients;

FR_HD FrBnGradCoefficients fr_bn_grad_coefficients(double sum_g, double sum_gx, float gamma, float invstd,
                                                   double n) {
  const double is = (double)invstd, dg = sum_gx * is;
  FrBnGradCoefficients c;
  c.a = (float)((double)gamma * is);
  c.b = (float)(sum_g / n);
  c.k = (float)(dg * is / n);
  c.dgamma = (float)dg;
  c.dbeta = (float)sum_g;
  return c;
}

FR_HD float fr_bn_dx_value(float g, float x, float mean, float a, float b, float k) {
  return a * (g - b - (x - mean) * k);
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_BATCHNORM_RULES_H_ */
