// The per-row softmax cross-entropy of the CUDA loss kernels (ops/softmax_xent.cu, ops/fc_softmax_xent.cu):
// one warp computes a row's loss, top-1 hit and gradient; softmax_xent_sum adds the rows' values in a fixed
// order (deterministic). One definition, so the fused head computes the loss node's bits.
#pragma once

#include <cfloat>

#include "cuda_common.h"
#include "ops/dependent_launch.cuh"

namespace fresco::cuda {
namespace {
constexpr int kRowThreads = 256;  // 8 rows (warps) per block
constexpr int kSumThreads = 512;

// The pieces of a row's softmax cross-entropy that both row functions below share, so they give the same
// bits. Warp max with the lowest index among equal maxima (every lane ends with the row's max and argmax).
__device__ __forceinline__ void warp_max_arg(float* mx, int64_t* arg) {
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, *mx, o);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, *arg, o);
    if (om > *mx || (om == *mx && oa < *arg)) *mx = om, *arg = oa;
  }
}
__device__ __forceinline__ void warp_sum2(double* a, double* b) {
  for (int o = 16; o > 0; o >>= 1) {
    *a += __shfl_xor_sync(0xffffffffu, *a, o);
    *b += __shfl_xor_sync(0xffffffffu, *b, o);
  }
}
// The smoothed loss from the log-sum-exp, the label's logit and the sum of the logits.
__device__ __forceinline__ float smoothed_loss(double lse, float z_label, double zsum, int64_t c, float eps) {
  return static_cast<float>((1.0 - eps) * (lse - z_label) + eps * (lse - zsum / static_cast<double>(c)));
}
// One element of the gradient row (probability minus the smoothed target, times loss scale / m).
__device__ __forceinline__ float xent_grad(float z, double lse, bool is_label, float eps, int64_t c,
                                           float inv_m) {
  const float off = eps / static_cast<float>(c);
  const float prob = static_cast<float>(exp(static_cast<double>(z) - lse));
  return (prob - off - (is_label ? 1.0f - eps : 0.0f)) * inv_m;
}
__device__ __forceinline__ float xent_inv_m(const FrStepScalars* scalars, int64_t m) {
  return (scalars ? scalars->loss_scale : 1.0f) / static_cast<float>(m);  // loss scaling
}

// One warp computes row r: max/argmax, log-sum-exp (double), smoothed loss, top-1 hit and the gradient row.
// Lane 0 returns the loss (NaN for a label outside [0, C)) and the hit.
__device__ void softmax_xent_row(const float* __restrict__ z, const int32_t* __restrict__ y,
                                 float* __restrict__ dz, int64_t r, int64_t m, int64_t c, float eps,
                                 const FrStepScalars* scalars, float* loss, float* hit) {
  const int lane = threadIdx.x & 31;
  const float* zr = z + r * c;
  const int32_t label = y[r];
  if (label < 0 || label >= c) {
    *loss = __int_as_float(0x7fc00000), *hit = 0.0f;  // NaN marks a bad label
    if (dz)  // and the row adds nothing to the gradients (not stale values)
      for (int64_t j = lane; j < c; j += 32) dz[r * c + j] = 0.0f;
    return;
  }
  float mx = -FLT_MAX;
  int64_t arg = c;
  for (int64_t j = lane; j < c; j += 32)
    if (zr[j] > mx || (zr[j] == mx && j < arg)) mx = zr[j], arg = j;
  warp_max_arg(&mx, &arg);
  double sum = 0.0, zsum = 0.0;
  for (int64_t j = lane; j < c; j += 32) sum += exp(static_cast<double>(zr[j] - mx)), zsum += zr[j];
  warp_sum2(&sum, &zsum);
  const double lse = log(sum) + mx;
  *loss = smoothed_loss(lse, zr[label], zsum, c, eps);
  *hit = arg == label ? 1.0f : 0.0f;
  if (dz) {
    const float inv_m = xent_inv_m(scalars, m);
    for (int64_t j = lane; j < c; j += 32) dz[r * c + j] = xent_grad(zr[j], lse, j == label, eps, c, inv_m);
  }
}

// softmax_xent_row for a row of at most 32 classes held in registers: lane j < c holds logit z (other lanes'
// z is not read) and gets its gradient element in *dz (0 on a bad label); inv_m is xent_inv_m's. The same
// steps on the same values as softmax_xent_row, so the same bits. Lane 0 returns the loss and the hit.
__device__ __forceinline__ void softmax_xent_lanes(float z, int32_t label, int c, float eps, float inv_m,
                                                   float* loss, float* hit, float* dz) {
  const int lane = threadIdx.x & 31;
  if (label < 0 || label >= c) {
    *loss = __int_as_float(0x7fc00000), *hit = 0.0f, *dz = 0.0f;
    return;
  }
  float mx = -FLT_MAX;
  int64_t arg = c;
  if (lane < c && (z > mx || (z == mx && lane < arg))) mx = z, arg = lane;
  warp_max_arg(&mx, &arg);
  double sum = 0.0, zsum = 0.0;
  if (lane < c) sum += exp(static_cast<double>(z - mx)), zsum += z;
  warp_sum2(&sum, &zsum);
  const double lse = log(sum) + mx;
  const float z_label = __shfl_sync(0xffffffffu, z, label);
  *loss = smoothed_loss(lse, z_label, zsum, c, eps);
  *hit = arg == label ? 1.0f : 0.0f;
  *dz = lane < c ? xent_grad(z, lse, lane == label, eps, c, inv_m) : 0.0f;
}

// Fixed-order sum of the per-row values: strided partial sums, then a tree (deterministic for a given m).
// Launched as a programmatic dependent of the row kernel (launch_after_prior; the row kernels call
// allow_dependent_launch first): it is resident when the rows finish and waits for them here.
__global__ void __launch_bounds__(kSumThreads)
    softmax_xent_sum(const float* __restrict__ row_loss, const float* __restrict__ row_hit, int64_t m,
                     FrBatchResults* __restrict__ out) {
  __shared__ double loss_part[kSumThreads];
  __shared__ float hit_part[kSumThreads];
  wait_for_prior_kernels();
  double l = 0.0;
  float h = 0.0f;
  for (int64_t r = threadIdx.x; r < m; r += kSumThreads) l += row_loss[r], h += row_hit[r];
  loss_part[threadIdx.x] = l;
  hit_part[threadIdx.x] = h;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + s];
      hit_part[threadIdx.x] += hit_part[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out->loss = static_cast<float>(loss_part[0] / static_cast<double>(m));
    out->correct = hit_part[0];
    out->samples = static_cast<float>(m);
  }
}

// softmax_xent_sum over the rows' values, as a programmatic dependent of the row kernel launched just before.
inline void launch_batch_sum(const Context* ctx, const float* row_loss, const float* row_hit, int64_t m,
                             FrBatchResults* out, cudaStream_t s) {
  launch_after_prior(ctx, softmax_xent_sum, 1, kSumThreads, s, row_loss, row_hit, m, out);
}
}  // namespace
}  // namespace fresco::cuda
