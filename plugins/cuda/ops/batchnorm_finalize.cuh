// A training batchnorm forward's per-channel finalize, shared by its finalize kernels (ops/batchnorm.cu) and
// the resident form that computes statistics, finalize and apply in one kernel (ops/bn_resident.cu), so
// both write the same bits: from the batch mean and biased variance, the saved statistics, the running
// statistics (momentum, unbiased variance) and the scale / shift pair the apply pass uses, derived from the
// saved float statistics so the backward can recompute them (batchnorm_relu_mask.cuh), and the apply on one
// vector.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fresco/batchnorm_rules.h"
#include "ops/batchnorm_relu_mask.cuh"

namespace fresco::cuda {

// What a training forward writes per channel besides y: the saved statistics and the moved running ones.
struct BnOutputs {
  const float *gamma, *beta;
  float *save_mean, *save_invstd, *run_mean, *run_var;
  double n;  // values per channel
  float eps, momentum;
};

// Channel c's saved statistics and running statistics from its batch mean and biased variance; returns its
// scale / shift.
__device__ __forceinline__ float2 bn_finalize_channel(int64_t c, float mean, double var, const BnOutputs& o) {
  const double invstd = 1.0 / sqrt(var + static_cast<double>(o.eps));
  o.save_mean[c] = mean;
  o.save_invstd[c] = static_cast<float>(invstd);
  const double mom = o.momentum;
  o.run_mean[c] = static_cast<float>((1.0 - mom) * o.run_mean[c] + mom * mean);
  o.run_var[c] = static_cast<float>((1.0 - mom) * o.run_var[c] + mom * var * o.n / (o.n - 1.0));
  return bn_scale_shift(o.gamma[c], o.beta[c], mean, static_cast<float>(invstd));
}

// Channel c's outputs from its totals t = (sum x, sum x^2) over o.n values: the statistics above, then its
// scale and shift into coef (C scales, then C shifts).
__device__ __forceinline__ void bn_finalize_totals(int64_t c, int64_t channels, double2 t, const BnOutputs& o,
                                                   float* coef) {
  float mean = 0.0f;
  double var = 0.0;
  fr_bn_stats_from_sums(t.x, t.y, o.n, &mean, &var);
  const float2 ss = bn_finalize_channel(c, mean, var, o);
  coef[c] = ss.x;
  coef[channels + c] = ss.y;
}

// The apply pass on one 16-byte vector of V channels (scale, shift the channels' coefficients): y =
// fma(x, scale, shift), + the residual's vector b with Residual, then the fused relu where relu is set.
template <class T, bool Residual>
__device__ __forceinline__ void bn_apply_vector(Vec16<T>& a, const Vec16<T>& b,
                                                const float (&scale)[Vec16<T>::kN],
                                                const float (&shift)[Vec16<T>::kN], int relu) {
#pragma unroll
  for (int j = 0; j < Vec16<T>::kN; ++j) {
    float v = bn_normalized(to_f(a.v[j]), scale[j], shift[j]);
    if constexpr (Residual) v += to_f(b.v[j]);
    a.v[j] = from_f<T>(relu && !(v > 0.0f) ? 0.0f : v);
  }
}

}  // namespace fresco::cuda
