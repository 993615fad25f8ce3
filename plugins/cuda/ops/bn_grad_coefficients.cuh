// A training batchnorm's backward coefficients and its dx value, shared by batchnorm_backward.cu and the
// kernels that apply that dx themselves (narrow_conv.cu's weight gradient, ops.h "batchnorm gradient
// prologue"), so every path computes the same bits: the host's formula (fresco/conv_prologue.hpp,
// bn_grad_coefficients / bn_dx_value) in double, each coefficient rounded once to f32.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

// From a channel's gradient sums t = (sum dy, sum dy (x - mean)) over n values: dx = a (dy - b - (x - mean)
// k) with a = gamma invstd, b = sum dy / n, k = dgamma invstd / n; dgamma = sum dy (x - mean) invstd.
struct BnGradCoef {
  float a, b, k, dgamma;
};
__device__ __forceinline__ BnGradCoef bn_grad_coef(double2 t, float gamma, float invstd, double n) {
  const double is = invstd, dg = t.y * is;
  return BnGradCoef{static_cast<float>(gamma * is), static_cast<float>(t.x / n),
                    static_cast<float>(dg * is / n), static_cast<float>(dg)};
}
__device__ __forceinline__ float bn_dx_value(float g, float x, float mean, float a, float b, float k) {
  return a * (g - b - (x - mean) * k);
}

}  // namespace fresco::cuda
