// Kernels of ops/thin_conv.h: direct convolutions for inputs of at most 4 channels in f16 / bf16.
#include <cstdint>

#include "ops/dtype.cuh"
#include "ops/thin_conv.h"

namespace fresco::cuda {

namespace {
constexpr int kThreads = 256;
constexpr int64_t kMaxChannels = 4, kMaxTaps = 64;
constexpr int64_t kMaxSharedWeights = 8192;  // floats of w in the forward's shared memory (32 KB)
constexpr int64_t kChunkPixels = 1024;       // weight gradient: output pixels per block (one partial sum)
constexpr int kBatchPixels = 32;             // weight gradient: dy and im2col rows staged at a time
constexpr int kMaxTapsPerThread = 32;

struct Geo {
  int n, h, w, c, k, r, s, p, q, sh, sw, ph, pw, dh, dw, taps;
};
Geo geo_of(const sdk::ConvShape& g) {
  return {static_cast<int>(g.n),  static_cast<int>(g.h),
          static_cast<int>(g.w),  static_cast<int>(g.c),
          static_cast<int>(g.k),  static_cast<int>(g.r),
          static_cast<int>(g.s),  static_cast<int>(g.p),
          static_cast<int>(g.q),  static_cast<int>(g.sh),
          static_cast<int>(g.sw), static_cast<int>(g.ph),
          static_cast<int>(g.pw), static_cast<int>(g.dh),
          static_cast<int>(g.dw), static_cast<int>(g.r * g.s * g.c)};
}

// Tap groups of the weight-gradient block (threads sharing an output channel) and taps per thread.
int tap_groups(const sdk::ConvShape& g) {
  return static_cast<int>(kThreads / g.k);
}
int64_t taps_per_thread(const sdk::ConvShape& g) {
  const int64_t groups = tap_groups(g), taps = g.r * g.s * g.c;
  return (taps + groups - 1) / groups;
}

// One thread per (output pixel, group of KT output channels): taps in (r, s, c) order, padding skipped;
// every lane of a warp reads the same weights (shared-memory broadcasts), and a pixel's KT outputs are
// written as KT / 8 16-byte vectors.
template <class T, int KT>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Geo g, const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y) {
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);  // [tap][K]
  for (int i = threadIdx.x; i < g.taps * g.k; i += blockDim.x) {
    const int k = i / g.taps, t = i - k * g.taps;  // w is [K][taps]: i walks it in order
    ws[t * g.k + k] = to_f(w[i]);
  }
  __syncthreads();
  const int groups = g.k / KT, total = g.n * g.p * g.q * groups;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int pix = i / groups, kg = i - pix * groups;
    const int np = pix / g.q, q = pix - np * g.q, n = np / g.p, p = np - n * g.p;
    float acc[KT];
#pragma unroll
    for (int j = 0; j < KT; ++j) acc[j] = 0.0f;
    for (int r = 0; r < g.r; ++r) {
      const int ih = p * g.sh - g.ph + r * g.dh;
      if (ih < 0 || ih >= g.h) continue;
      for (int s = 0; s < g.s; ++s) {
        const int iw = q * g.sw - g.pw + s * g.dw;
        if (iw < 0 || iw >= g.w) continue;
        const T* xp = x + ((static_cast<int64_t>(n) * g.h + ih) * g.w + iw) * g.c;
        const float* wp = ws + (r * g.s + s) * g.c * g.k + kg * KT;
        for (int c = 0; c < g.c; ++c) {
          const float xv = to_f(xp[c]);
          const float4* w4 = reinterpret_cast<const float4*>(wp + c * g.k);
#pragma unroll
          for (int j = 0; j < KT / 4; ++j) {
            const float4 a = w4[j];
            acc[4 * j] = fmaf(xv, a.x, acc[4 * j]), acc[4 * j + 1] = fmaf(xv, a.y, acc[4 * j + 1]);
            acc[4 * j + 2] = fmaf(xv, a.z, acc[4 * j + 2]), acc[4 * j + 3] = fmaf(xv, a.w, acc[4 * j + 3]);
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < KT / 8; ++v) {
      Vec16<T> out;
#pragma unroll
      for (int j = 0; j < 8; ++j) out.v[j] = from_f<T>(acc[8 * v + j]);
      store16(y, (static_cast<int64_t>(pix) * g.k + kg * KT) / 8 + v, out);
    }
  }
}

// Weight gradient, first pass: block b sums output pixels [b * kChunkPixels, ...) in order into
// part[b][k][tap]. Thread (k, tap group) owns taps_per_thread consecutive taps of output channel k; the
// block stages kBatchPixels rows of dy and of the im2col matrix at a time in shared memory, so the sums read
// shared memory only (dy by consecutive channels, the im2col row as broadcasts).
template <class T>
__global__ void __launch_bounds__(kThreads)
    filter_chunks_kernel(Geo g, const T* __restrict__ dy, const T* __restrict__ x, float* __restrict__ part,
                         int tpt) {
  __shared__ float patch[kBatchPixels][kMaxTaps];
  __shared__ float dys[kBatchPixels][kThreads];
  const int k = static_cast<int>(threadIdx.x % g.k), t0 = static_cast<int>(threadIdx.x / g.k) * tpt;
  float acc[kMaxTapsPerThread];
#pragma unroll
  for (int u = 0; u < kMaxTapsPerThread; ++u) acc[u] = 0.0f;
  const int npix = g.n * g.p * g.q;
  const int c0 = static_cast<int>(blockIdx.x * kChunkPixels);
  const int c1 = c0 + static_cast<int>(kChunkPixels) < npix ? c0 + static_cast<int>(kChunkPixels) : npix;
  for (int b0 = c0; b0 < c1; b0 += kBatchPixels) {
    const int nb = c1 - b0 < kBatchPixels ? c1 - b0 : kBatchPixels;
    __syncthreads();  // the previous batch is consumed
    for (int i = threadIdx.x; i < nb * g.taps; i += blockDim.x) {
      const int j = i / g.taps, t = i - j * g.taps, pix = b0 + j;
      const int np = pix / g.q, q = pix - np * g.q, n = np / g.p, p = np - n * g.p;
      const int rs = t / g.c, c = t - rs * g.c, r = rs / g.s, s = rs - r * g.s;
      const int ih = p * g.sh - g.ph + r * g.dh, iw = q * g.sw - g.pw + s * g.dw;
      patch[j][t] = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w
                        ? to_f(x[((static_cast<int64_t>(n) * g.h + ih) * g.w + iw) * g.c + c])
                        : 0.0f;
    }
    for (int i = threadIdx.x; i < nb * g.k; i += blockDim.x) {
      const int j = i / g.k;
      dys[j][i - j * g.k] = to_f(dy[static_cast<int64_t>(b0) * g.k + i]);
    }
    __syncthreads();
    for (int j = 0; j < nb; ++j) {
      const float d = dys[j][k];
#pragma unroll
      for (int u = 0; u < kMaxTapsPerThread; ++u)
        if (u < tpt && t0 + u < g.taps) acc[u] = fmaf(d, patch[j][t0 + u], acc[u]);
    }
  }
  float* out = part + (static_cast<int64_t>(blockIdx.x) * g.k + k) * g.taps;
#pragma unroll
  for (int u = 0; u < kMaxTapsPerThread; ++u)
    if (u < tpt && t0 + u < g.taps) out[t0 + u] = acc[u];
}

// Second pass, one warp per weight: lane l adds chunks l, l + 32, ... in order, then a fixed butterfly.
template <class T>
__global__ void __launch_bounds__(kThreads)
    filter_finish_kernel(const float* __restrict__ part, T* __restrict__ dw, int64_t chunks, int64_t count) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; i < count;
       i += warps) {
    float s = 0.0f;
    for (int64_t b = lane; b < chunks; b += 32) s += part[b * count + i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) dw[i] = from_f<T>(s);
  }
}

int64_t chunks_of(const sdk::ConvShape& g) {
  return (g.n * g.p * g.q + kChunkPixels - 1) / kChunkPixels;
}

template <class F>
void with_low_type(FrDType dtype, F&& f) {
  if (dtype == FR_F16)
    f(__half{});
  else
    f(__nv_bfloat16{});
}
}  // namespace

bool thin_conv_fits(const Context* ctx, const sdk::ConvShape& g, FrDType dtype) {
  if (!ctx->thin_conv || (dtype != FR_F16 && dtype != FR_BF16) || g.g != 1) return false;
  if (g.c > kMaxChannels || g.k % 8 != 0 || g.k > kThreads || kThreads % g.k != 0) return false;
  const int64_t taps = g.r * g.s * g.c;
  if (taps > kMaxTaps || taps * g.k > kMaxSharedWeights || taps_per_thread(g) > kMaxTapsPerThread)
    return false;
  return g.n * g.h * g.w * g.c < INT32_MAX && g.n * g.p * g.q * (g.k / 8) < INT32_MAX;
}

void thin_conv_forward(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w, void* y,
                       cudaStream_t s) {
  FR_PLUGIN_CHECK(reinterpret_cast<uintptr_t>(y) % 16 == 0, FR_ERR_INVALID_ARGUMENT,
                  "cuda thin conv: y must be 16-byte aligned");
  const Geo geo = geo_of(g);
  const int kt = g.k >= 64 ? 64 : static_cast<int>(g.k);
  const int64_t total = g.n * g.p * g.q * (g.k / kt);
  const size_t smem = static_cast<size_t>(geo.taps) * g.k * sizeof(float);
  const unsigned blocks = grid_for(total, kThreads, 0);
  with_low_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (kt == 64)
      forward_kernel<T, 64><<<blocks, kThreads, smem, s>>>(geo, xt, wt, yt);
    else if (kt == 32)
      forward_kernel<T, 32><<<blocks, kThreads, smem, s>>>(geo, xt, wt, yt);
    else if (kt == 16)
      forward_kernel<T, 16><<<blocks, kThreads, smem, s>>>(geo, xt, wt, yt);
    else
      forward_kernel<T, 8><<<blocks, kThreads, smem, s>>>(geo, xt, wt, yt);
  });
  FR_CUDA_LAUNCH_CHECK();
}

uint64_t thin_conv_filter_workspace(const sdk::ConvShape& g) {
  return static_cast<uint64_t>(chunks_of(g) * g.k * g.r * g.s * g.c) * sizeof(float);
}

void thin_conv_backward_filter(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* x,
                               void* dw, void* workspace, cudaStream_t s) {
  FR_PLUGIN_CHECK(workspace, FR_ERR_INVALID_ARGUMENT,
                  "cuda thin conv: the weight gradient needs its workspace");
  const Geo geo = geo_of(g);
  const int64_t chunks = chunks_of(g), count = g.k * g.r * g.s * g.c;
  float* part = static_cast<float*>(workspace);
  with_low_type(dtype, [&](auto tag) {
    using T = decltype(tag);
    filter_chunks_kernel<T><<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(
        geo, static_cast<const T*>(dy), static_cast<const T*>(x), part, static_cast<int>(taps_per_thread(g)));
    FR_CUDA_LAUNCH_CHECK();
    filter_finish_kernel<T>
        <<<grid_for(count, kThreads, 0), kThreads, 0, s>>>(part, static_cast<T*>(dw), chunks, count);
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
