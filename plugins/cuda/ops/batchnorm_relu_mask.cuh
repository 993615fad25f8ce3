// The fused relu of a CUDA batchnorm, as forward applies it and as backward recomputes its mask from x
// instead of reading y (ops.h: batchnorm_backward's optional beta input). Both sides derive scale and shift
// from the saved float statistics with the same single-rounding operations, so the recomputed mask equals
// y > 0 bit for bit, including values that round to zero in f16 / bf16. Used by ops/batchnorm.cu and
// ops/batchnorm_backward.cu; test: tests/plugins/cuda/test_cuda_low_precision.cpp.
#pragma once

#include "ops/dtype.cuh"
#include "ops/rounds_to_zero.h"

namespace fresco::cuda {

// scale = gamma * invstd, shift = beta - mean * scale (each rounded once).
__device__ __forceinline__ float2 bn_scale_shift(float gamma, float beta, float mean, float invstd) {
  const float scale = __fmul_rn(gamma, invstd);
  return make_float2(scale, __fmaf_rn(-mean, scale, beta));
}

// The normalised value before the relu (and before a residual), rounded once.
__device__ __forceinline__ float bn_normalized(float x, float scale, float shift) {
  return __fmaf_rn(x, scale, shift);
}

// Whether the fused relu passes the gradient at x: its output, stored as T, is positive, i.e. the value
// before the relu exceeds kRoundsToZeroBelow<T> (rounds_to_zero.h: the same answer as rounding it to T and
// comparing, without the two conversions; NaN passes neither).
template <class T>
__device__ __forceinline__ bool bn_relu_passes(float x, float scale, float shift) {
  return bn_normalized(x, scale, shift) > kRoundsToZeroBelow<T>;
}

}  // namespace fresco::cuda
