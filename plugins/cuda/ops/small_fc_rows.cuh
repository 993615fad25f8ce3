// The per-row loops of the small-fc kernels (ops/small_fc.cu), shared with the fused training head
// (ops/fc_softmax_xent.cu) so both sum in one order and give the same bits.
#pragma once

#include <cstdint>

namespace fresco::cuda {
namespace {

constexpr uint64_t kMaxSharedWeightBytes = 48 << 10;  // w goes to shared memory up to this size

// Bytes of shared memory a row kernel launches with for an [n, k] w: all of w when it fits, else none.
inline uint64_t shared_weight_bytes(int n, int64_t k) {
  const uint64_t bytes = static_cast<uint64_t>(n) * k * sizeof(float);
  return bytes <= kMaxSharedWeightBytes ? bytes : 0;
}

// Launch<NMAX>::run with the smallest register width NMAX that holds n outputs.
template <template <int> class Launch, class... A>
void dispatch(int n, A&&... a) {
  if (n <= 8)
    Launch<8>::run(a...);
  else if (n <= 16)
    Launch<16>::run(a...);
  else
    Launch<32>::run(a...);
}

// Copies w (n*k floats) into shared memory `ws` with four loads in flight per thread (a load-store loop keeps
// one), then waits for the whole block.
__device__ __forceinline__ void stage_weights(const float* __restrict__ w, float* ws, int64_t total) {
  const int64_t step = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + 3 * step < total; i += 4 * step) {
    float t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) t[u] = __ldg(w + i + u * step);
#pragma unroll
    for (int u = 0; u < 4; ++u) ws[i + u * step] = t[u];
  }
  for (; i < total; i += step) ws[i] = w[i];
  __syncthreads();
}

// Where the block reads w from: its copy in dynamic shared memory when the launch gave it one (`shared`,
// uniform over the block), else w itself.
__device__ __forceinline__ const float* block_weights(const float* __restrict__ w, int64_t total,
                                                      bool shared) {
  extern __shared__ float ws[];
  if (!shared) return w;
  stage_weights(w, ws, total);
  return ws;
}

// Butterflies sum each lane's n partial dot products over the warp; returns sum j on lane j (0 on lanes >=
// n). Every lane must call it (n is uniform).
template <int NMAX>
__device__ __forceinline__ float lanes_sum_to_lane(const float (&acc)[NMAX], int n, int lane) {
  float out = 0.0f;
#pragma unroll
  for (int j = 0; j < NMAX; ++j) {
    if (j < n) {
      float v = acc[j];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == j) out = v;
    }
  }
  return out;
}

// One warp, one row: lanes stride over k four loads at a time, each lane keeps n partial dot products, and
// butterflies sum them. Returns x_row . w_lane on lanes below n (0 elsewhere). Every lane must call it.
template <int NMAX>
__device__ __forceinline__ float row_dots(const float* __restrict__ xr, const float* wp, int n, int64_t k,
                                          int lane) {
  float acc[NMAX];
#pragma unroll
  for (int j = 0; j < NMAX; ++j) acc[j] = 0.0f;
  for (int64_t c0 = lane; c0 < k; c0 += 4 * 32) {
    float xv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) xv[u] = c0 + 32 * u < k ? xr[c0 + 32 * u] : 0.0f;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c < k) {
#pragma unroll
        for (int j = 0; j < NMAX; ++j)
          if (j < n) acc[j] = fmaf(xv[u], wp[j * k + c], acc[j]);
      }
    }
  }
  return lanes_sum_to_lane<NMAX>(acc, n, lane);
}

// One element of an input gradient: sum over the n classes of d[j] * w[j, c], classes in order.
template <int NMAX>
__device__ __forceinline__ float column_dot(const float* d, const float* __restrict__ w, int n, int64_t k,
                                            int64_t c) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < NMAX; ++j)
    if (j < n) s = fmaf(d[j], w[j * k + c], s);
  return s;
}

}  // namespace
}  // namespace fresco::cuda
