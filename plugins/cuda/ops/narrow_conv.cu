// Narrow-input convolutions on tensor cores (narrow_conv.h).
#include "ops/narrow_conv.h"

#include "fresco/batchnorm_rules.h"
#include "ops/channel_moments.h"
#include "ops/dtype.cuh"
#include "ops/mma_sync.cuh"

namespace fresco::cuda {

namespace {
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kMaxTaps = 32;
// Output positions a block aims at (whole output rows of one image): forward, weight gradient.
constexpr int kForwardPositions = 512, kWgradPositions = 1024;
// Resident forward blocks per SM the registers must allow (at most 64 per thread): ResNet's CIFAR stem at
// batch 512 is 1024 blocks, one wave on 132 SMs at 8 (at 72 registers 7 fit, and 100 blocks made a second).
constexpr int kForwardBlocksPerSm = 8;
// Lanes per element of the weight gradient's partials finalize (a power of two; 32 x this threads a block).
constexpr int kFinalizeLanes = 32;
// The block's input tile in shared memory: with the kernels' static arrays (at most 20.1 KB: the weight
// gradient's with 64 outputs, more than 16 taps and the batchnorm prologue; each kernel asserts its sum) it
// stays within the 48 KB a block may use without opting in to more.
constexpr int kMaxTileBytes = 27 << 10;
constexpr int kBlockSharedBytes = 48 << 10;
// tile_bytes rounds the tile and its zero slot up to 16 bytes: at most this much past kMaxTileBytes.
constexpr int kTileRounding = 16;

// The geometry in the kernels' index types (narrow_conv_fits keeps every field in int range), with the
// blocking: a block takes `pr` output rows of one image, whose input window (zero-padded) is a tile of
// in_rows x wp x C values.
struct Geo {
  int n, h, w, c, k, s, p, q, sh, sw, ph, pw, dh, dw, taps;
  int pr, in_rows, wp;
  __host__ __device__ int tile() const { return in_rows * wp * c; }
  __host__ __device__ int blocks() const { return n * ((p + pr - 1) / pr); }
};

Geo geo_of(const sdk::ConvShape& g, int positions) {
  Geo o{};
  o.n = static_cast<int>(g.n), o.h = static_cast<int>(g.h), o.w = static_cast<int>(g.w);
  o.c = static_cast<int>(g.c), o.k = static_cast<int>(g.k), o.s = static_cast<int>(g.s);
  o.p = static_cast<int>(g.p), o.q = static_cast<int>(g.q), o.sh = static_cast<int>(g.sh);
  o.sw = static_cast<int>(g.sw), o.ph = static_cast<int>(g.ph), o.pw = static_cast<int>(g.pw);
  o.dh = static_cast<int>(g.dh), o.dw = static_cast<int>(g.dw), o.taps = static_cast<int>(g.c * g.r * g.s);
  o.wp = (o.q - 1) * o.sw + (o.s - 1) * o.dw + 1;
  o.pr = positions / o.q > 1 ? positions / o.q : 1;
  if (o.pr > o.p) o.pr = o.p;
  for (;; --o.pr) {  // fewer rows while the tile does not fit (pr = 1 always fits: narrow_conv_fits)
    o.in_rows = (o.pr - 1) * o.sh + (static_cast<int>(g.r) - 1) * o.dh + 1;
    if (o.pr == 1 || (static_cast<int64_t>(o.tile()) + 1) * 2 <= kMaxTileBytes) break;
  }
  return o;
}

size_t tile_bytes(const Geo& g) {
  return ((static_cast<size_t>(g.tile()) + 1) * 2 + 15) & ~size_t{15};  // and one zero slot
}

__device__ __forceinline__ uint32_t pack(uint32_t lo, uint32_t hi) {
  return lo | (hi << 16);
}
// The block's part of the work: image n, output rows p0 .. p0 + rows - 1 (positions = rows * Q).
struct Band {
  int n, p0, positions;
};
__device__ __forceinline__ Band band_of(const Geo& g) {
  const int per_image = (g.p + g.pr - 1) / g.pr;
  const int n = static_cast<int>(blockIdx.x) / per_image,
            p0 = (static_cast<int>(blockIdx.x) % per_image) * g.pr;
  const int rows = g.p - p0 < g.pr ? g.p - p0 : g.pr;
  return {n, p0, rows * g.q};
}

// Copies the band's input window to shared memory: rows p0 * sh - ph ..., columns -pw ..., zero outside the
// map, and a zero after the tile (tile[g.tile()], what padding taps read). A tile row is one input row's
// elements shifted by pw columns, so element e of tile row r reads x[row h0 + r][e - pw * C] (no per-element
// column or channel division).
__device__ void load_tile(uint16_t* tile, const uint16_t* __restrict__ x, const Geo& g, const Band& b) {
  const uint16_t* xn = x + static_cast<int64_t>(b.n) * g.h * g.w * g.c;
  const int h0 = b.p0 * g.sh - g.ph, row_len = g.wp * g.c, n = g.tile();
  const int shift = g.pw * g.c, end = min(row_len, (g.pw + g.w) * g.c);  // tile elements [shift, end) are x's
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const int row = i / row_len, e = i - row * row_len, hi = h0 + row;
    tile[i] = hi >= 0 && hi < g.h && e >= shift && e < end
                  ? xn[static_cast<int64_t>(hi) * g.w * g.c + (e - shift)]
                  : uint16_t{0};
  }
  if (threadIdx.x == 0) tile[n] = 0;
}

// Offset in the tile of tap t from its position's window corner (t = (r * S + s) * C + c), or -1 for a
// padding tap (t >= C * R * S).
__device__ __forceinline__ int tap_offset(const Geo& g, int t) {
  if (t >= g.taps) return -1;
  const int rs = t / g.c;
  return ((rs / g.s) * g.dh * g.wp + (rs % g.s) * g.dw) * g.c + t % g.c;
}
// Offset in the tile of the window corner of the band's position i, or -1 past its positions.
__device__ __forceinline__ int corner_offset(const Geo& g, const Band& b, int i) {
  if (i >= b.positions) return -1;
  const int pl = i / g.q, q = i - pl * g.q;
  return (pl * g.sh * g.wp + q * g.sw) * g.c;
}
// The value at (corner, tap): the zero slot when either is -1.
__device__ __forceinline__ uint32_t tile_at(const uint16_t* tile, const Geo& g, int corner, int tap) {
  return tile[corner >= 0 && tap >= 0 ? corner + tap : g.tile()];
}

// Forward: each warp computes 16 positions x K channels per step (NT n-tiles of 8 channels, KS k-steps of
// 16 taps). A thread holds, per k-step, the A values of taps 2tq, 2tq+1, 2tq+8, 2tq+9 for positions gid and
// gid + 8 (mma.sync's fragment layout); the weights ([K][taps], zero-padded to whole k-steps) sit in shared
// memory and come as B fragments through ldmatrix, which keeps the registers low (kForwardBlocksPerSm). The
// outputs are staged per warp as rows of 16-bit values, stored 16 bytes at a time, and summed per channel
// from there (4 channels per lane: 8 registers of sums instead of 4 per n-tile, so 64 registers need no
// spills).
template <class T, int NT, int KS>
__global__ void __launch_bounds__(kThreads, kForwardBlocksPerSm)
    narrow_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                          double* __restrict__ part, Geo g) {
  constexpr int K = 8 * NT, kPad = K + 8;  // padded staging rows: conflict-free fragment stores
  constexpr int kTaps = 16 * KS, kTapPad = kTaps + 8;
  extern __shared__ __align__(16) uint16_t tile[];
  __shared__ __align__(16) uint16_t stage[kWarps][16][kPad];
  __shared__ __align__(16) uint16_t wsm[K][kTapPad];
  __shared__ float wsum[kWarps][K], wsq[kWarps][K];
  static_assert(sizeof(stage) + sizeof(wsm) + sizeof(wsum) + sizeof(wsq) + kMaxTileBytes + kTileRounding <=
                    kBlockSharedBytes,
                "the static arrays and the largest tile fit a block's shared memory");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const Band band = band_of(g);
  load_tile(tile, reinterpret_cast<const uint16_t*>(x), g, band);
  const uint16_t* wb = reinterpret_cast<const uint16_t*>(w);
  for (int i = threadIdx.x; i < K * kTaps; i += kThreads) {
    const int k = i / kTaps, t = i - k * kTaps;
    wsm[k][t] = t < g.taps ? wb[k * g.taps + t] : uint16_t{0};
  }
  int tap[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int j = 0; j < 4; ++j) tap[ks][j] = tap_offset(g, ks * 16 + 2 * tq + (j & 1) + (j >> 1) * 8);
  // Channel sums from the staged rows (the values as stored; rows past the band's positions hold zeros):
  // lane l adds channels 4 (l % kSumLanes) .. + 3 over rows kSumRows (l / kSumLanes) .. + kSumRows - 1.
  constexpr int kSumLanes = K / 4, kSumRows = 16 * kSumLanes / 32;
  const int sum_c = (lane % kSumLanes) * 4, sum_r = (lane / kSumLanes) * kSumRows;
  float ssum[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ssq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  __syncthreads();  // the tile and the weights
  uint16_t* yb = reinterpret_cast<uint16_t*>(y) + (static_cast<int64_t>(band.n) * g.p + band.p0) * g.q * K;
  for (int i0 = warp * 16; i0 < band.positions; i0 += kWarps * 16) {
    const int c0 = corner_offset(g, band, i0 + gid), c1 = corner_offset(g, band, i0 + gid + 8);
    uint32_t a[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      a[ks][0] = pack(tile_at(tile, g, c0, tap[ks][0]), tile_at(tile, g, c0, tap[ks][1]));
      a[ks][1] = pack(tile_at(tile, g, c1, tap[ks][0]), tile_at(tile, g, c1, tap[ks][1]));
      a[ks][2] = pack(tile_at(tile, g, c0, tap[ks][2]), tile_at(tile, g, c0, tap[ks][3]));
      a[ks][3] = pack(tile_at(tile, g, c1, tap[ks][2]), tile_at(tile, g, c1, tap[ks][3]));
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      // B fragments of channels nt * 8 .. + 7: k-step ks's taps 0-7 in b[2ks], 8-15 in b[2ks + 1]
      uint32_t b[2 * KS];
      if constexpr (KS == 2) {
        ldmatrix_x4(reinterpret_cast<uint32_t(&)[4]>(b), &wsm[nt * 8 + (lane & 7)][(lane >> 3) * 8]);
      } else {
        ldmatrix_x2(reinterpret_cast<uint32_t(&)[2]>(b), &wsm[nt * 8 + (lane & 7)][((lane >> 3) & 1) * 8]);
      }
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) mma(d, a[ks], b[2 * ks], b[2 * ks + 1], T{});
      // y as stored (rounded once)
      float f0, f1, f2, f3;
      const uint32_t lo = round2(d[0], d[1], f0, f1, T{}), hi = round2(d[2], d[3], f2, f3, T{});
      *reinterpret_cast<uint32_t*>(&stage[warp][gid][nt * 8 + 2 * tq]) = lo;
      *reinterpret_cast<uint32_t*>(&stage[warp][gid + 8][nt * 8 + 2 * tq]) = hi;
    }
    __syncwarp();
    if (part) {  // the channel sums of exactly the stored values
#pragma unroll
      for (int r = 0; r < kSumRows; ++r) {
        const uint2 u = *reinterpret_cast<const uint2*>(&stage[warp][sum_r + r][sum_c]);
        T v[4];
        memcpy(v, &u, sizeof u);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float f = to_f(v[j]);
          ssum[j] += f, ssq[j] += f * f;
        }
      }
    }
    for (int v = lane; v < 16 * NT; v += 32) {  // whole 16-byte pieces of the tile's rows
      const int row = v / NT, cv = v - row * NT;
      if (i0 + row < band.positions)
        *reinterpret_cast<uint4*>(yb + static_cast<int64_t>(i0 + row) * K + cv * 8) =
            *reinterpret_cast<const uint4*>(&stage[warp][row][cv * 8]);
    }
    __syncwarp();
  }
  if (!part) return;  // the same for the whole grid
    // Channel sums: over the warp's row groups (a fixed shuffle tree), then the warps in order.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float s = ssum[j], q = ssq[j];
    add_over_lanes<kSumLanes, 32>(s, q);
    if (lane < kSumLanes) wsum[warp][sum_c + j] = s, wsq[warp][sum_c + j] = q;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < K; c += kThreads) {
    double s = 0.0, q = 0.0;
    for (int wp = 0; wp < kWarps; ++wp) s += wsum[wp][c], q += wsq[wp][c];
    part[(static_cast<int64_t>(blockIdx.x) * K + c) * 2] = s;
    part[(static_cast<int64_t>(blockIdx.x) * K + c) * 2 + 1] = q;
  }
}

// Weight gradient as the GEMM dw[K, taps] = dy^T [K, positions] * x_col [positions, taps] over the band: a
// warp takes 16 positions per step, stages their dy rows in shared memory ([position][channel], coalesced
// 16-byte loads, the next step's already in flight) and reads the A fragments (channels x positions) with
// ldmatrix .trans; the B values (positions 2tq, 2tq+1, 2tq+8, 2tq+9 at tap nt * 8 + gid) come from the
// input tile. MT m-tiles of 16 channels, NT n-tiles of 8 taps; the warps' sums are added in order, then
// written as the block's partials.
// kBn (the batchnorm gradient prologue, ops.h): dy is a batchnorm's premasked output gradient and the rows
// staged are that batchnorm's dx, from its input bn.y (this conv's output, loaded beside dy) with the
// coefficients batchnorm_backward computes (fr_bn_grad_coefficients, fresco/batchnorm_rules.h), rounded to T
// as its dx pass stores them. A lane always stages the same 8 channels (its 16-byte piece of a row: cv = lane
// % kVecs for every row it loads), so it reads each channel's four coefficients once per step, as one float4
// from shared memory (skewed by one per piece: no bank conflicts), and applies them to its rows of that step:
// read per element instead, the coefficients were 128 four-byte loads per lane and step, and the kernel was
// bound by its shared-memory pipe (ncu: L1 86% busy, DRAM 32%; 73-76 us in the step against 45 without the
// prologue); in registers for the whole kernel they took 167 registers and 3 blocks per SM instead of the 4
// its grid needs for one wave.
template <class T, int MT, int NT, bool kBn>
__global__ void __launch_bounds__(kThreads, 4)
    narrow_wgrad_kernel(const T* __restrict__ dy, const T* __restrict__ x, float* __restrict__ part, Geo g,
                        NarrowBnDy bn) {
  constexpr int K = 16 * MT, kPad = K + 8, kVecs = K / 8;  // 16-byte pieces per row of dy
  constexpr int kPerLane = 16 * kVecs / 32;                // = MT
  extern __shared__ __align__(16) uint16_t tile[];
  __shared__ __align__(16) uint16_t stage[kWarps][16][kPad];
  // The warps' sums, each lane's pairs as float2: rows of 8 NT + 8 floats put a half-warp's four rows (gid
  // 0-3, 8-byte stores at 2 tq) on disjoint 8-bank groups. Rows of 8 NT floats put the lanes of a row pair on
  // the same banks: with NT = 4 an 8-way conflict (4-way with NT = 2) on each of the 4 MT NT loads and stores
  // per lane and warp (ncu: 0.85M conflicted store wavefronts of 1.6M per ResNet-18 stem call at batch 512).
  constexpr int kRed = 8 * NT + 8;
  static_assert((kRed % 32 == 8 || kRed % 32 == 24), "four rows on disjoint 8-bank groups");
  __shared__ __align__(16) float red[K][kRed];
  // kBn: a, b, k and the mean of channel c at coef[c + c / 8] (one float4 per channel, skewed per piece)
  __shared__ float4 coef[kBn ? K + K / 8 : 1];
  static_assert(
      sizeof(stage) + sizeof(red) + sizeof(coef) + kMaxTileBytes + kTileRounding <= kBlockSharedBytes,
      "the static arrays and the largest tile fit a block's shared memory");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const Band band = band_of(g);
  if constexpr (kBn) {
    const double n = static_cast<double>(g.n) * g.p * g.q;
    for (int c = threadIdx.x; c < K; c += kThreads) {
      const FrBnGradCoefficients f =
          fr_bn_grad_coefficients(bn.gsums[c], bn.gsums[K + c], bn.gamma[c], bn.invstd[c], n);
      coef[c + c / 8] = make_float4(f.a, f.b, f.k, bn.mean[c]);
    }
  }
  load_tile(tile, reinterpret_cast<const uint16_t*>(x), g, band);
  const int64_t first_vec = (static_cast<int64_t>(band.n) * g.p + band.p0) * g.q * kVecs;
  const uint4* dyv = reinterpret_cast<const uint4*>(dy) + first_vec;
  const uint4* yv = kBn ? reinterpret_cast<const uint4*>(bn.y) + first_vec : nullptr;
  int tap[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) tap[nt] = tap_offset(g, nt * 8 + gid);
  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
  auto load_rows = [&](int i0, uint4(&v)[kPerLane], uint4(&w)[kPerLane]) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i, row = e / kVecs, cv = e - row * kVecs;
      const bool in = i0 + row < band.positions;
      v[i] = in ? __ldg(dyv + (i0 + row) * kVecs + cv) : make_uint4(0u, 0u, 0u, 0u);
      if constexpr (kBn) w[i] = in ? __ldg(yv + (i0 + row) * kVecs + cv) : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  uint4 cur[kPerLane], cury[kPerLane];
  int i0 = warp * 16;
  if (i0 < band.positions) load_rows(i0, cur, cury);
  __syncthreads();  // the tile (and kBn's coefficients)
  static_assert(32 % kVecs == 0, "a lane's piece of every row it loads is lane % kVecs");
  for (; i0 < band.positions; i0 += kWarps * 16) {
    if constexpr (kBn) {
      const int cv = lane % kVecs;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 f = coef[cv * 9 + j];  // channel cv * 8 + j: a, b, k, mean
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          if (i0 + (lane + 32 * i) / kVecs >= band.positions) continue;  // rows past the band stay zero
          T* gv = reinterpret_cast<T*>(&cur[i]);
          const T* xv = reinterpret_cast<const T*>(&cury[i]);
          gv[j] = from_f<T>(fr_bn_dx_value(to_f(gv[j]), to_f(xv[j]), f.w, f.x, f.y, f.z));
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i, row = e / kVecs, cv = e - row * kVecs;
      *reinterpret_cast<uint4*>(&stage[warp][row][cv * 8]) = cur[i];
    }
    if (i0 + kWarps * 16 < band.positions)
      load_rows(i0 + kWarps * 16, cur, cury);  // the next step's, in flight
    const int c0 = corner_offset(g, band, i0 + 2 * tq), c1 = corner_offset(g, band, i0 + 2 * tq + 1),
              c2 = corner_offset(g, band, i0 + 2 * tq + 8), c3 = corner_offset(g, band, i0 + 2 * tq + 9);
    uint32_t b[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      b[nt][0] = pack(tile_at(tile, g, c0, tap[nt]), tile_at(tile, g, c1, tap[nt]));
      b[nt][1] = pack(tile_at(tile, g, c2, tap[nt]), tile_at(tile, g, c3, tap[nt]));
    }
    __syncwarp();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, &stage[warp][(lane >> 4) * 8 + (lane & 7)][mt * 16 + ((lane >> 3) & 1) * 8]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma(acc[mt][nt], a, b[nt][0], b[nt][1], T{});
    }
    __syncwarp();
  }
  for (int wp = 0; wp < kWarps; ++wp) {  // the warps' sums in order
    if (warp == wp)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int k0 = mt * 16 + gid, t0 = nt * 8 + 2 * tq;
          float2* r = reinterpret_cast<float2*>(&red[k0][t0]);
          float2* r8 = reinterpret_cast<float2*>(&red[k0 + 8][t0]);
          if (wp == 0) {
            *r = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *r8 = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
          } else {  // the same adds in the same order as one float at a time
            float2 u = *r, u8 = *r8;
            u.x += acc[mt][nt][0], u.y += acc[mt][nt][1], u8.x += acc[mt][nt][2], u8.y += acc[mt][nt][3];
            *r = u, *r8 = u8;
          }
        }
    __syncthreads();
  }
  const int n = K * g.taps;
  for (int i = threadIdx.x; i < n; i += kThreads)
    part[static_cast<int64_t>(blockIdx.x) * n + i] = red[i / g.taps][i % g.taps];
}

// dw[i] = the sum of the blocks' partials of element i in a fixed order, in double, rounded to float, then T:
// a block takes 32 elements, each with kFinalizeLanes lanes that add every kFinalizeLanes-th block's partial
// (16 loads each for ResNet's stem at batch 512, 4 in flight), then a fixed tree over the lanes.
template <class T>
__global__ void __launch_bounds__(32 * kFinalizeLanes)
    narrow_wgrad_finalize_kernel(const float* __restrict__ part, int blocks, int n, T* __restrict__ dw) {
  __shared__ double lanes[kFinalizeLanes][32];
  const int i = blockIdx.x * 32 + threadIdx.x;
  double s = 0.0;
  if (i < n) {
#pragma unroll 4
    for (int b = threadIdx.y; b < blocks; b += kFinalizeLanes) s += part[static_cast<int64_t>(b) * n + i];
  }
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
#pragma unroll
  for (int half = kFinalizeLanes / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.y) < half)
      lanes[threadIdx.y][threadIdx.x] += lanes[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && i < n) dw[i] = from_f<T>(static_cast<float>(lanes[0][threadIdx.x]));
}

template <class T, int NT>
void forward_for(const T* x, const T* w, T* y, double* part, const Geo& g, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(g.blocks()));
  if (g.taps <= 16)
    narrow_forward_kernel<T, NT, 1><<<grid, kThreads, tile_bytes(g), s>>>(x, w, y, part, g);
  else
    narrow_forward_kernel<T, NT, 2><<<grid, kThreads, tile_bytes(g), s>>>(x, w, y, part, g);
}

template <class T, int MT, bool kBn>
void wgrad_for(const T* dy, const T* x, float* part, const Geo& g, const NarrowBnDy& bn, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(g.blocks()));
  if (g.taps <= 16)
    narrow_wgrad_kernel<T, MT, 2, kBn><<<grid, kThreads, tile_bytes(g), s>>>(dy, x, part, g, bn);
  else
    narrow_wgrad_kernel<T, MT, 4, kBn><<<grid, kThreads, tile_bytes(g), s>>>(dy, x, part, g, bn);
}
template <class T, int MT>
void wgrad_for(const T* dy, const T* x, float* part, const Geo& g, const NarrowBnDy* bn, cudaStream_t s) {
  if (bn)
    wgrad_for<T, MT, true>(dy, x, part, g, *bn, s);
  else
    wgrad_for<T, MT, false>(dy, x, part, g, NarrowBnDy{}, s);
}

}  // namespace

bool narrow_conv_fits(const sdk::ConvShape& g, FrDType dtype) {
  constexpr int64_t kIntMax = 0x7fffffff;  // the kernels index within one image, and blocks, in int
  if (!(dtype == FR_F16 || dtype == FR_BF16) || g.g != 1 || g.c * g.r * g.s > kMaxTaps ||
      !(g.k == 16 || g.k == 32 || g.k == 64) || g.h * g.w * g.c > kIntMax || g.n * g.p > kIntMax)
    return false;
  // one output row's input window must fit the tile
  const int64_t wp = (g.q - 1) * g.sw + (g.s - 1) * g.dw + 1, rows = (g.r - 1) * g.dh + 1;
  return (rows * wp * g.c + 1) * 2 <= kMaxTileBytes;
}

uint64_t narrow_forward_workspace(const sdk::ConvShape& g) {
  return static_cast<uint64_t>(geo_of(g, kForwardPositions).blocks()) * g.k * 2 * sizeof(double);
}

uint64_t narrow_wgrad_workspace(const sdk::ConvShape& g) {
  return static_cast<uint64_t>(geo_of(g, kWgradPositions).blocks()) * g.k * g.c * g.r * g.s * sizeof(float);
}

void launch_narrow_forward(const Context* ctx, const sdk::ConvShape& g, FrDType dtype, const void* x,
                           const void* w, void* y, float* sums, void* ws, cudaStream_t s) {
  FR_PLUGIN_CHECK(narrow_conv_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                  "cuda narrow conv: the convolution does not fit the narrow kernels");
  FR_PLUGIN_CHECK(aligned16({y}) && (!sums || ws), FR_ERR_INVALID_ARGUMENT,
                  "cuda narrow conv: y must be 16-byte aligned, and the sums need the workspace");
  const Geo geo = geo_of(g, kForwardPositions);
  double* part = sums ? static_cast<double*>(ws) : nullptr;
  with_half_type(dtype, "cuda narrow conv", [&](auto tag) {
    using T = decltype(tag);
    const T *xt = static_cast<const T*>(x), *wt = static_cast<const T*>(w);
    T* yt = static_cast<T*>(y);
    if (g.k == 16)
      forward_for<T, 2>(xt, wt, yt, part, geo, s);
    else if (g.k == 32)
      forward_for<T, 4>(xt, wt, yt, part, geo, s);
    else
      forward_for<T, 8>(xt, wt, yt, part, geo, s);
  });
  FR_CUDA_LAUNCH_CHECK();
  if (sums) launch_sums_finalize(ctx, geo.blocks(), g.k, part, sums, s);
}

void launch_narrow_wgrad(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* x, void* dw,
                         void* ws, cudaStream_t s, const NarrowBnDy* bn) {
  FR_PLUGIN_CHECK(narrow_conv_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                  "cuda narrow conv: the convolution does not fit the narrow kernels");
  FR_PLUGIN_CHECK(aligned16({dy, bn ? bn->y : dy}) && ws, FR_ERR_INVALID_ARGUMENT,
                  "cuda narrow conv: dy (and the prologue's y) must be 16-byte aligned, and the weight "
                  "gradient needs the "
                  "workspace");
  const Geo geo = geo_of(g, kWgradPositions);
  float* part = static_cast<float*>(ws);
  const int n = geo.k * geo.taps;
  with_half_type(dtype, "cuda narrow conv", [&](auto tag) {
    using T = decltype(tag);
    const T *dyt = static_cast<const T*>(dy), *xt = static_cast<const T*>(x);
    if (g.k == 16)
      wgrad_for<T, 1>(dyt, xt, part, geo, bn, s);
    else if (g.k == 32)
      wgrad_for<T, 2>(dyt, xt, part, geo, bn, s);
    else
      wgrad_for<T, 4>(dyt, xt, part, geo, bn, s);
    FR_CUDA_LAUNCH_CHECK();
    narrow_wgrad_finalize_kernel<T><<<static_cast<unsigned>((n + 31) / 32), dim3(32, kFinalizeLanes), 0, s>>>(
        part, geo.blocks(), n, static_cast<T*>(dw));
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
