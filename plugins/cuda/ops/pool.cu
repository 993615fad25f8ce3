// CUDA 2-D pooling on NHWC f32/f16/bf16 maps (computed in float) with the CPU kernels' semantics
// (plugins/cpu/ops/pool.cpp): max pool (padding never wins, the first maximum in row-major window order, NaN
// propagates), average pool (count_include_pad), global average pool (accumulated in double). Every kernel is
// a gather with one thread per output element, so results are deterministic; the backwards gather instead of
// scattering (max: the argmax of each covering window whose maximum equals the element; average: the sum of
// the covering windows). Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include "fresco/pool_geometry.hpp"
#include "ops/channel_sums.cuh"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
using sdk::PoolGeom;

// The pooling geometry in index type I: int32 when every index fits (fast division), else int64.
template <class I>
struct Geom {
  I n, h, w, c, p, q, kh, kw, sh, sw, ph, pw;
};
template <class I>
Geom<I> geom_as(const PoolGeom& g) {
  return {static_cast<I>(g.n),  static_cast<I>(g.h),  static_cast<I>(g.w),  static_cast<I>(g.c),
          static_cast<I>(g.p),  static_cast<I>(g.q),  static_cast<I>(g.kh), static_cast<I>(g.kw),
          static_cast<I>(g.sh), static_cast<I>(g.sw), static_cast<I>(g.ph), static_cast<I>(g.pw)};
}
// True when int32 indices cover both maps, with room for the grid-stride loops' last step (index + the
// grid's threads, at most a few million) not to wrap past 2^31.
inline bool fits_int32(const PoolGeom& g) {
  constexpr int64_t kLimit = (int64_t{1} << 31) - (int64_t{1} << 26);
  return g.n * g.h * g.w * g.c < kLimit && g.n * g.p * g.q * g.c < kLimit;
}

// Last output row/column whose window covers input position `pos` (clamped to the output size).
template <class I>
__device__ I last_covering(I pos, I pad, I stride, I out) {
  const I i = (pos + pad) / stride;
  return i < out - 1 ? i : out - 1;
}
template <class I>
__device__ I first_covering_i(I pos, I pad, I k, I stride) {
  const I num = pos + pad - k + 1;  // smallest i with i * stride >= num
  return num <= 0 ? I{0} : (num + stride - 1) / stride;
}

// Offset (into image `img`'s map) of the first maximum of window (i, j), channel k (NaN: the last NaN).
template <class T, class I>
__device__ I window_argmax(const T* base, const Geom<I>& g, I i, I j, I k) {
  const I y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
  float best = 0.0f;
  I arg = -1;
  for (I yy = y0 < 0 ? 0 : y0; yy < y0 + g.kh && yy < g.h; ++yy)
    for (I xx = x0 < 0 ? 0 : x0; xx < x0 + g.kw && xx < g.w; ++xx) {
      const I off = (yy * g.w + xx) * g.c + k;
      const float v = to_f(base[off]);
      if (arg < 0 || v > best || isnan(v)) best = v, arg = off;
    }
  return arg;
}

template <class T, class I>
__global__ void max_pool_kernel(const T* x, T* y, Geom<I> g) {
  const I total = g.n * g.p * g.q * g.c;
  for (I o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += gridDim.x * blockDim.x) {
    const I k = o % g.c, r = o / g.c, j = r % g.q, r2 = r / g.q, i = r2 % g.p, img = r2 / g.p;
    const T* base = x + static_cast<int64_t>(img) * g.h * g.w * g.c;
    y[o] = base[window_argmax(base, g, i, j, k)];  // a copy: exact in any dtype
  }
}

// True when input offset `me` (equal to the window maximum, or both NaN) is the forward's argmax of window
// (i, j): the first maximum in row-major window order, or the last NaN when the maximum is NaN. Only the
// window positions on one side of `me` are read, and the scan stops at the first equal one (a window of
// zeros after a relu costs one read per element).
template <class T, class I>
__device__ bool is_window_argmax(const T* base, const Geom<I>& g, I i, I j, I k, I me, bool nan) {
  const I y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
  const float m = to_f(base[me]);
  for (I yy = y0 < 0 ? 0 : y0; yy < y0 + g.kh && yy < g.h; ++yy)
    for (I xx = x0 < 0 ? 0 : x0; xx < x0 + g.kw && xx < g.w; ++xx) {
      const I off = (yy * g.w + xx) * g.c + k;
      if (off == me) {
        if (!nan) return true;  // nothing equal came before
        continue;
      }
      const float v = to_f(base[off]);
      if (!nan && off < me && v == m) return false;   // an earlier equal maximum wins
      if (nan && off > me && isnan(v)) return false;  // a later NaN wins
    }
  return true;
}

// One thread per input element: of the windows covering it, those whose maximum y equals this element (or
// both are NaN) pass it their gradient when it is that window's argmax.
template <class T, class I>
__global__ void max_pool_backward_kernel(const T* dy, const T* x, const T* y, T* dx, Geom<I> g) {
  const I total = g.n * g.h * g.w * g.c;
  for (I t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
    const I k = t % g.c, r = t / g.c, xx = r % g.w, r2 = r / g.w, yy = r2 % g.h, img = r2 / g.h;
    const I me = (yy * g.w + xx) * g.c + k;
    const T* base = x + static_cast<int64_t>(img) * g.h * g.w * g.c;
    const float v = to_f(x[t]);
    const I i1 = last_covering(yy, g.ph, g.sh, g.p), j1 = last_covering(xx, g.pw, g.sw, g.q);
    float acc = 0.0f;
    for (I i = first_covering_i(yy, g.ph, g.kh, g.sh); i <= i1; ++i)
      for (I j = first_covering_i(xx, g.pw, g.kw, g.sw); j <= j1; ++j) {
        const int64_t o = ((static_cast<int64_t>(img) * g.p + i) * g.q + j) * g.c + k;
        const float m = to_f(y[o]);
        const bool nan = isnan(m);
        if (!(v == m || (nan && isnan(v)))) continue;
        if (is_window_argmax(base, g, i, j, k, me, nan)) acc += to_f(dy[o]);
      }
    dx[t] = from_f<T>(acc);
  }
}

// Tiled max pool backward: a block owns an 8 x 8 input tile of one image and 32 channels. It first finds the
// argmax (offset) and gradient of every window covering the tile, once each, in shared memory (warps read 32
// neighbouring channels, no divergence), then every input element of the tile gathers from the windows
// covering it in a fixed order. About three loads per input element instead of a window scan per covering
// window. Used when the covering windows of a tile fit kTileWindows (else the per-element kernel above).
constexpr int kTile = 8, kTileLanes = 32, kTileWindows = 100;

// Windows (along one axis) that cover input positions [a, a + kTile): first and count.
inline __host__ __device__ int covering_span(int a, int n_in, int pad, int k, int stride, int n_out,
                                             int* first) {
  const int last_pos = a + kTile - 1 < n_in - 1 ? a + kTile - 1 : n_in - 1;
  const int f = a + pad - k + 1 <= 0 ? 0 : (a + pad - k + 1 + stride - 1) / stride;
  int l = (last_pos + pad) / stride;
  if (l > n_out - 1) l = n_out - 1;
  *first = f;
  return l >= f ? l - f + 1 : 0;
}

template <class T>
__global__ void __launch_bounds__(256)
    max_pool_backward_tiled_kernel(const T* dy, const T* x, T* dx, Geom<int32_t> g, int channel_groups) {
  __shared__ int32_t arg[kTileWindows * kTileLanes];
  __shared__ float grad[kTileWindows * kTileLanes];
  const int img = blockIdx.z / channel_groups, k0 = (blockIdx.z % channel_groups) * kTileLanes;
  const int h0 = blockIdx.y * kTile, w0 = blockIdx.x * kTile;
  int i0, j0;
  const int ni = covering_span(h0, g.h, g.ph, g.kh, g.sh, g.p, &i0);
  const int nj = covering_span(w0, g.w, g.pw, g.kw, g.sw, g.q, &j0);
  const T* base = x + static_cast<int64_t>(img) * g.h * g.w * g.c;
  for (int idx = threadIdx.x; idx < ni * nj * kTileLanes; idx += blockDim.x) {
    const int lane = idx % kTileLanes, win = idx / kTileLanes, k = k0 + lane;
    if (k >= g.c) continue;
    const int i = i0 + win / nj, j = j0 + win % nj;
    arg[idx] = window_argmax(base, g, i, j, k);
    grad[idx] = to_f(dy[((static_cast<int64_t>(img) * g.p + i) * g.q + j) * g.c + k]);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kTile * kTile * kTileLanes; idx += blockDim.x) {
    const int lane = idx % kTileLanes, pix = idx / kTileLanes, k = k0 + lane;
    const int yy = h0 + pix / kTile, xx = w0 + pix % kTile;
    if (k >= g.c || yy >= g.h || xx >= g.w) continue;
    const int me = (yy * g.w + xx) * g.c + k;
    const int i1 = last_covering(yy, g.ph, g.sh, g.p), j1 = last_covering(xx, g.pw, g.sw, g.q);
    float acc = 0.0f;
    for (int i = first_covering_i(yy, g.ph, g.kh, g.sh); i <= i1; ++i)
      for (int j = first_covering_i(xx, g.pw, g.kw, g.sw); j <= j1; ++j) {
        const int slot = ((i - i0) * nj + (j - j0)) * kTileLanes + lane;
        if (arg[slot] == me) acc += grad[slot];
      }
    dx[static_cast<int64_t>(img) * g.h * g.w * g.c + me] = from_f<T>(acc);
  }
}

template <class T>
__global__ void avg_pool_kernel(const T* x, T* y, PoolGeom g, float inv) {
  FR_CUDA_GRID_LOOP(o, g.n * g.p * g.q * g.c) {
    const int64_t k = o % g.c, j = (o / g.c) % g.q, i = (o / (g.c * g.q)) % g.p, img = o / (g.c * g.q * g.p);
    const int64_t y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
    const T* base = x + img * g.h * g.w * g.c + k;
    float acc = 0.0f;
    for (int64_t yy = y0 < 0 ? 0 : y0; yy < y0 + g.kh && yy < g.h; ++yy)
      for (int64_t xx = x0 < 0 ? 0 : x0; xx < x0 + g.kw && xx < g.w; ++xx)
        acc += to_f(base[(yy * g.w + xx) * g.c]);
    y[o] = from_f<T>(acc * inv);
  }
}

template <class T>
__global__ void avg_pool_backward_kernel(const T* dy, T* dx, PoolGeom g, float inv) {
  FR_CUDA_GRID_LOOP(t, g.n * g.h * g.w * g.c) {
    const int64_t k = t % g.c, xx = (t / g.c) % g.w, yy = (t / (g.c * g.w)) % g.h,
                  img = t / (g.c * g.w * g.h);
    const int64_t i1 = last_covering<int64_t>(yy, g.ph, g.sh, g.p),
                  j1 = last_covering<int64_t>(xx, g.pw, g.sw, g.q);
    float acc = 0.0f;
    for (int64_t i = sdk::first_covering(yy, g.ph, g.kh, g.sh); i <= i1; ++i)
      for (int64_t j = sdk::first_covering(xx, g.pw, g.kw, g.sw); j <= j1; ++j)
        acc += to_f(dy[((img * g.p + i) * g.q + j) * g.c + k]);
    dx[t] = from_f<T>(acc * inv);
  }
}

template <class T>
__global__ void gap_kernel(const T* x, T* y, int64_t n, int64_t hw, int64_t c, double inv) {
  FR_CUDA_GRID_LOOP(o, n * c) {
    const int64_t img = o / c, k = o % c;
    double acc = 0.0;
    for (int64_t s = 0; s < hw; ++s) acc += to_f(x[(img * hw + s) * c + k]);
    y[o] = from_f<T>(static_cast<float>(acc * inv));
  }
}

template <class T>
__global__ void gap_backward_kernel(const T* dy, T* dx, int64_t n, int64_t hw, int64_t c, float inv) {
  FR_CUDA_GRID_LOOP(t, n * hw * c) {
    dx[t] = from_f<T>(to_f(dy[(t / (hw * c)) * c + t % c]) * inv);
  }
}

// The same, 16 bytes a thread in blocks of kFixedThreads (C fits them: fixed_channels_fit): block b takes
// images b, b + gridDim.x, ..., thread t the channel vector t % cv (cv = C / V vectors a position) at
// positions t / cv, t / cv + kFixedThreads / cv, ...: the image's gradient is loaded and scaled once and
// stored hw / (kFixedThreads / cv) times, and no 64-bit division runs per element (the scalar form, 2 bytes
// a store and two divisions an element, took 15.7 us at ResNet-18's b512 stage 4 on an H200: ncu,
// forty-fifth session).
template <class T>
__global__ void gap_backward_vec_kernel(const T* dy, T* dx, int64_t n, int64_t hw, int64_t c, float inv) {
  constexpr int V = Vec16<T>::kN;
  const int cv = static_cast<int>(c / V), per = kFixedThreads / cv;
  const int j = static_cast<int>(threadIdx.x) % cv, s0 = static_cast<int>(threadIdx.x) / cv;
  for (int64_t img = blockIdx.x; img < n; img += gridDim.x) {
    Vec16<T> g = load16(dy, img * cv + j);
#pragma unroll
    for (int k = 0; k < V; ++k) g.v[k] = from_f<T>(to_f(g.v[k]) * inv);
    for (int64_t s = s0; s < hw; s += per) store16(dx, (img * hw + s) * cv + j, g);
  }
}

unsigned grid(void* ctx, int64_t n) {
  return grid_for(n, 256, ctx_of(ctx)->sm_count);
}

}  // namespace

FR_CUDA_KERNEL_RUN(max_pool2d) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "max_pool2d");
    const PoolGeom g =
        sdk::pool_geom(sdk::params<FrPoolParams>(call), call->in[0], call->out[0], "max_pool2d");
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      const unsigned blocks = grid(ctx, g.n * g.p * g.q * g.c);
      if (fits_int32(g))
        max_pool_kernel<T, int32_t><<<blocks, 256, 0, stream_of(call)>>>(
            sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), geom_as<int32_t>(g));
      else
        max_pool_kernel<T, int64_t><<<blocks, 256, 0, stream_of(call)>>>(
            sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), geom_as<int64_t>(g));
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(max_pool2d_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "max_pool2d_backward");
    const PoolGeom g =
        sdk::pool_geom(sdk::params<FrPoolParams>(call), call->in[1], call->in[0], "max_pool2d_backward");
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == sdk::numel(call->in[1]), FR_ERR_INVALID_ARGUMENT,
                    "max_pool2d_backward: x and dx: shapes differ");
    FR_PLUGIN_CHECK(sdk::numel(call->in[2]) == sdk::numel(call->in[0]), FR_ERR_INVALID_ARGUMENT,
                    "max_pool2d_backward: y and dy: shapes differ");
    FR_PLUGIN_CHECK(call->out[0].data != call->in[0].data, FR_ERR_INVALID_ARGUMENT,
                    "max_pool2d_backward: dx must not alias dy");
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      const unsigned blocks = grid(ctx, g.n * g.h * g.w * g.c);
      const T *dy = sdk::data<T>(call->in[0]), *x = sdk::data<T>(call->in[1]), *y = sdk::data<T>(call->in[2]);
      T* dx = sdk::data<T>(call->out[0]);
      int i0, j0;
      const int wins = covering_span(0, static_cast<int>(g.h), static_cast<int>(g.ph), static_cast<int>(g.kh),
                                     static_cast<int>(g.sh), static_cast<int>(g.p), &i0) *
                       covering_span(0, static_cast<int>(g.w), static_cast<int>(g.pw), static_cast<int>(g.kw),
                                     static_cast<int>(g.sw), static_cast<int>(g.q), &j0);
      // Interior tiles can see one more window per axis than the first one: bound with (n+1)^2.
      const int bound =
          static_cast<int>((g.kh + kTile - 1) / g.sh + 2) * static_cast<int>((g.kw + kTile - 1) / g.sw + 2);
      const int64_t groups = (g.c + kTileLanes - 1) / kTileLanes;
      if (fits_int32(g) && bound <= kTileWindows && wins <= kTileWindows && g.n * groups <= 65535) {
        const dim3 tiles(static_cast<unsigned>((g.w + kTile - 1) / kTile),
                         static_cast<unsigned>((g.h + kTile - 1) / kTile),
                         static_cast<unsigned>(g.n * groups));
        max_pool_backward_tiled_kernel<T>
            <<<tiles, 256, 0, stream_of(call)>>>(dy, x, dx, geom_as<int32_t>(g), static_cast<int>(groups));
      } else if (fits_int32(g))
        max_pool_backward_kernel<T, int32_t>
            <<<blocks, 256, 0, stream_of(call)>>>(dy, x, y, dx, geom_as<int32_t>(g));
      else
        max_pool_backward_kernel<T, int64_t>
            <<<blocks, 256, 0, stream_of(call)>>>(dy, x, y, dx, geom_as<int64_t>(g));
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(avg_pool2d) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "avg_pool2d");
    const PoolGeom g =
        sdk::pool_geom(sdk::params<FrPoolParams>(call), call->in[0], call->out[0], "avg_pool2d");
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      avg_pool_kernel<T><<<grid(ctx, g.n * g.p * g.q * g.c), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), g, 1.0f / static_cast<float>(g.kh * g.kw));
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(avg_pool2d_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "avg_pool2d_backward");
    const PoolGeom g =
        sdk::pool_geom(sdk::params<FrPoolParams>(call), call->out[0], call->in[0], "avg_pool2d_backward");
    FR_PLUGIN_CHECK(call->out[0].data != call->in[0].data, FR_ERR_INVALID_ARGUMENT,
                    "avg_pool2d_backward: dx must not alias dy");
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      avg_pool_backward_kernel<T><<<grid(ctx, g.n * g.h * g.w * g.c), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), g, 1.0f / static_cast<float>(g.kh * g.kw));
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(global_avg_pool) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "global_avg_pool");
    const sdk::GapShape gs = sdk::gap_shape(call->in[0], call->out[0], "global_avg_pool", "x", "y");
    const int64_t n = gs.n, hw = gs.hw, c = gs.c;
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      gap_kernel<T><<<grid(ctx, n * c), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), n, hw, c, 1.0 / static_cast<double>(hw));
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(global_avg_pool_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "global_avg_pool_backward");
    const sdk::GapShape gs =
        sdk::gap_shape(call->out[0], call->in[0], "global_avg_pool_backward", "dx", "dy");
    const int64_t n = gs.n, hw = gs.hw, c = gs.c;
    FR_PLUGIN_CHECK(call->out[0].data != call->in[0].data || hw == 1, FR_ERR_INVALID_ARGUMENT,
                    "global_avg_pool_backward: dx must not alias dy");
    expect_same_dtype(call, call->out[0].dtype, "pool");
    with_float_type(call->out[0].dtype, "pool", [&](auto tag) {
      using T = decltype(tag);
      const T* dy = sdk::data<T>(call->in[0]);
      T* dx = sdk::data<T>(call->out[0]);
      const auto inv = static_cast<float>(1.0 / static_cast<double>(hw));
      if (fixed_channels_fit<T>(c) && aligned16({dy, dx})) {  // a block an image, up to 8 an SM
        gap_backward_vec_kernel<T>
            <<<grid_for(n, 1, ctx_of(ctx)->sm_count), kFixedThreads, 0, stream_of(call)>>>(dy, dx, n, hw, c,
                                                                                           inv);
      } else {
        gap_backward_kernel<T><<<grid(ctx, n * hw * c), 256, 0, stream_of(call)>>>(dy, dx, n, hw, c, inv);
      }
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
