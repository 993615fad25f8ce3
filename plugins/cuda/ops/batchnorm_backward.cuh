// The pieces of the CUDA batchnorm backward (ops/batchnorm_backward.cu) that its resident form
// (ops/bn_resident_backward.cu) shares, so both add and write the same bits: the fused relu's mask, one
// vector's terms of the two gradient sums, the per-channel coefficients from their totals, and one vector's
// dx.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fresco/batchnorm_rules.h"
#include "ops/batchnorm_relu_mask.cuh"
#include "ops/channel_sums.cuh"

namespace fresco::cuda {

// The fused relu's mask, chosen at compile time so each kernel carries only its own mode: none (no fused
// relu), read from the relu's output y, or recomputed from x (batchnorm_relu_mask.cuh).
enum MaskMode : int { kNoMask = 0, kReadMask = 1, kRecomputeMask = 2 };

template <class T>
struct ReluMask {
  const T* y = nullptr;                                                               // kReadMask
  const float *gamma = nullptr, *beta = nullptr, *mean = nullptr, *invstd = nullptr;  // kRecomputeMask
  // This thread's channels' scale and shift for the recomputed mask.
  template <int V>
  __device__ void coefficients(int64_t ch, float (&scale)[V], float (&shift)[V]) const {
    float g[V], b[V], m[V], s[V];
    load_channels(gamma, ch, g);
    load_channels(beta, ch, b);
    load_channels(mean, ch, m);
    load_channels(invstd, ch, s);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float2 ss = bn_scale_shift(g[j], b[j], m[j], s[j]);
      scale[j] = ss.x, shift[j] = ss.y;
    }
  }
};

// Whether the mask passes element j of a 16-byte vector (x and, when read, y loaded by the caller).
template <int M, class T, int V>
__device__ __forceinline__ bool passes(const Vec16<T>& xv, const Vec16<T>& yv, int j, const float (&scale)[V],
                                       const float (&shift)[V]) {
  if constexpr (M == kRecomputeMask) return bn_relu_passes<T>(to_f(xv.v[j]), scale[j], shift[j]);
  if constexpr (M == kReadMask) return to_f(yv.v[j]) > 0.0f;
  return true;
}

// One vector's terms of the two gradient sums (sum g, sum g (x - mean)) into a thread's per-channel sums,
// g masked by the fused relu.
template <int M, class T, class Acc, int V>
__device__ __forceinline__ void add_grad_vector(const Vec16<T>& g, const Vec16<T>& xv, const Vec16<T>& yv,
                                                const float (&scale)[V], const float (&shift)[V],
                                                const Acc (&mu)[V], Acc (&a)[V], Acc (&b)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const Acc gj = passes<M>(xv, yv, j, scale, shift) ? static_cast<Acc>(to_f(g.v[j])) : Acc(0);
    add_grad_terms<Acc>(gj, to_f(xv.v[j]), mu[j], a[j], b[j]);
  }
}

// dx of one vector, written over g: a (g - b - (x - mean) k) per channel (ca, cb, ck), g masked as above.
template <int M, class T, int V>
__device__ __forceinline__ void bn_dx_vector(Vec16<T>& g, const Vec16<T>& xv, const Vec16<T>& yv,
                                             const float (&scale)[V], const float (&shift)[V],
                                             const float (&mu)[V], const float (&ca)[V], const float (&cb)[V],
                                             const float (&ck)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float gj = passes<M>(xv, yv, j, scale, shift) ? to_f(g.v[j]) : 0.0f;
    g.v[j] = from_f<T>(fr_bn_dx_value(gj, to_f(xv.v[j]), mu[j], ca[j], cb[j], ck[j]));
  }
}

// Channel c's outputs from its totals t = (sum dy, sum dy (x - mean)); dgamma and dbeta only where given.
__device__ __forceinline__ void write_grad_coefficients(ChannelChunks k, int64_t c, double2 t,
                                                        const float* gamma, const float* invstd,
                                                        float* dgamma, float* dbeta, float* coef) {
  const FrBnGradCoefficients f =
      fr_bn_grad_coefficients(t.x, t.y, gamma[c], invstd[c], static_cast<double>(k.rows));
  if (dgamma) dgamma[c] = f.dgamma, dbeta[c] = f.dbeta;
  coef[c] = f.a, coef[k.c + c] = f.b, coef[2 * k.c + c] = f.k;
}

}  // namespace fresco::cuda
