// The stage-2 probe's register-A layout (bench/conv128_rs_probe.cu; docs/decisions.md, "Next step"):
// ResNet-18's 3x3 128 -> 128 convolution on 16x16 maps (NHWC, fp16 / bf16) with the positions as wgmma's M
// and the activations as its A operand in registers, so a batchnorm + relu before the convolution (kFused) is
// applied to the fragments in registers and nothing is written back to shared memory.
//
// A block takes whole images (persistent: images blockIdx.x, + gridDim.x, ...): 256 positions x 128 output
// channels, two MMA warpgroups of two m64 tiles each (and a producer warpgroup) (warp wq of warpgroup g
// computes output rows 8 g + wq and 8 g + wq + 4, its 16 columns the fragment's 16 rows), wgmma m64n128k16
// with A from registers. The image's window (18 x 18 positions with the zero halo, 128 channels) comes by TMA
// as 16 planes of 8 channels, two window buffers; each k16 step's A fragments are ldmatrix'd from it at the
// tap's offset. The weights stream as B through three stages of 64 k x 128 outputs (16 KB, one bulk copy each
// from a chunk-plane copy of the weights: [144 chunks][128 outputs][8 k]) issued by the producer's first
// thread, so every image reads the 295 KB of weights once from L2. The epilogue rounds y into the image's
// window buffer (rows of 272 bytes), stores it as 16-byte vectors and, with kFused, adds y's per-channel sums
// and sums of squares (of the rounded values). Other forms (the template flags below): the batchnorm
// applied ahead by the storer warps (which then store the applied map a weight gradient needs), y straight
// from the accumulators. Measured on H100s in the fortieth and forty-first sessions (docs/performance.md):
// plain 64-67 us, the fused forms 89-116 us (the storers' hand-off alone, with y's sums, 80-82; kInterleave
// 104), where the product's three passes for such a layer take about 100. A diagnostic, not part of the
// product.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/mma_sync.cuh"
#include "ops/wgmma.cuh"

namespace fresco::bench::rs {

using namespace fresco::cuda;  // NOLINT: the sm_90a building blocks

constexpr int kC = 128, kW = 16, kPos = 256, kWin = 18;  // channels, map side, positions, window side
constexpr int kPlaneTx = kWin * kWin * 16;               // one window plane: 8 channels, 5184 bytes
constexpr int kWinPlane = 5248;                          // its place in shared memory, 128-byte aligned
constexpr int kWinBytes = 16 * kWinPlane;                // 83968
constexpr int kStageBytes = 64 * kC * 2;                 // 64 k x 128 outputs
constexpr int kStagesPerImage = 9 * kC / 64;             // 18
constexpr int kStages = 3;
constexpr int kRowBytes = 272;  // a staged output position: 256 bytes + 16 (conflict-free 4-byte writes)
constexpr int kThreads = 384;   // two MMA warpgroups and the producer warpgroup (one thread issues)
constexpr int kOffStages = 2 * kWinBytes;
constexpr int kOffCoef = kOffStages + kStages * kStageBytes;
constexpr int kOffRed = kOffCoef + 2 * kC * 4;
constexpr int kOffCoef16 = kOffRed + 2 * kC * 4;
constexpr int kOffBars = kOffCoef16 + kC * 4;
constexpr int kSmem = kOffBars + 12 * 8;
static_assert(kPos * kRowBytes <= kWinBytes, "the staged image fits its window buffer");

struct Args {
  const void* wperm;  // [144][128][8]
  void* y;            // [n][16][16][128]
  int n;
  const float *scale, *shift;  // kFused: the batchnorm's per-channel scale and shift (relu after)
  double* part;                // kFused: [block][128][2] sums and sums of squares of y
  // kAhead: the applied map (relu(x * scale + shift) as T, [n][16][16][128]); null: not stored
  void* applied;
  int handoff_only =
      0;  // kAhead, diagnostic (timing only, y wrong): the storers hand each window on unapplied
};

#define FR_RS_D64                                                                                          \
  FR_WGMMA_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), \
      "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),           \
      "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]),           \
      "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),           \
      "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define FR_RS_REGS                                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,"    \
  "%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
FR_WGMMA(wgmma128, 64, "m64n128k16", FR_RS_REGS, "%69", FR_RS_D64)

// bytes from global memory at src to shared memory at dst (both 16-byte aligned) by the copy engine,
// completing on mbarrier bar
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// relu(v * scale + shift) on the two 16-bit values of v, in fp32 and rounded once (the apply pass's
// arithmetic)
__device__ __forceinline__ uint32_t bn_relu2(uint32_t v, float2 sc, float2 sh, __half) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&v));
  const float a = fmaf(f.x, sc.x, sh.x), b = fmaf(f.y, sc.y, sh.y);
  const __half2 r = __floats2half2_rn(a > 0.0f ? a : 0.0f, b > 0.0f ? b : 0.0f);
  return *reinterpret_cast<const uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t bn_relu2(uint32_t v, float2 sc, float2 sh, __nv_bfloat16) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  const float a = fmaf(f.x, sc.x, sh.x), b = fmaf(f.y, sc.y, sh.y);
  const __nv_bfloat162 r = __floats2bfloat162_rn(a > 0.0f ? a : 0.0f, b > 0.0f ? b : 0.0f);
  return *reinterpret_cast<const uint32_t*>(&r);
}

// The batchnorm applied to one tile's A fragment for k16 step (stage st, kk): registers 0 and 2 hold column
// gid of the tile's row, 1 and 3 column gid + 8; channels 2 tq (+1) in 0 and 1, + 8 in 2 and 3. The halo
// (window row 0 or 17, column 0 or 17) stays zero.
template <class T>
__device__ __forceinline__ void apply_fragment(uint32_t (&a)[4], const float* coef, int st, int kk, int tq,
                                               bool row_halo, bool lo_halo, bool hi_halo) {
  const int c0 = 64 * (st & 1) + 16 * kk + 2 * tq;
  const float2 sc0 = *reinterpret_cast<const float2*>(coef + c0),
               sc1 = *reinterpret_cast<const float2*>(coef + c0 + 8),
               sh0 = *reinterpret_cast<const float2*>(coef + kC + c0),
               sh1 = *reinterpret_cast<const float2*>(coef + kC + c0 + 8);
  a[0] = row_halo || lo_halo ? 0u : bn_relu2(a[0], sc0, sh0, T{});
  a[1] = row_halo || hi_halo ? 0u : bn_relu2(a[1], sc0, sh0, T{});
  a[2] = row_halo || lo_halo ? 0u : bn_relu2(a[2], sc1, sh1, T{});
  a[3] = row_halo || hi_halo ? 0u : bn_relu2(a[3], sc1, sh1, T{});
}

// The same with 16-bit arithmetic (kPacked16: scale and shift rounded to T, one fused multiply-add and one
// max per pair): ch holds the pairs' scale at [c / 2] and shift at [64 + c / 2].
__device__ __forceinline__ uint32_t bn_relu2_packed(uint32_t v, uint32_t sc, uint32_t sh, __half) {
  const __half2 r =
      __hmax2(__hfma2(*reinterpret_cast<const __half2*>(&v), *reinterpret_cast<const __half2*>(&sc),
                      *reinterpret_cast<const __half2*>(&sh)),
              __half2{});
  return *reinterpret_cast<const uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t bn_relu2_packed(uint32_t v, uint32_t sc, uint32_t sh, __nv_bfloat16) {
  const __nv_bfloat162 r = __hmax2(
      __hfma2(*reinterpret_cast<const __nv_bfloat162*>(&v), *reinterpret_cast<const __nv_bfloat162*>(&sc),
              *reinterpret_cast<const __nv_bfloat162*>(&sh)),
      __nv_bfloat162{});
  return *reinterpret_cast<const uint32_t*>(&r);
}
template <class T>
__device__ __forceinline__ void apply_fragment_packed(uint32_t (&a)[4], const uint32_t* ch, int st, int kk,
                                                      int tq, bool row_halo, bool lo_halo, bool hi_halo) {
  const int p0 = 32 * (st & 1) + 8 * kk + tq;  // the pair of channels 2 tq, 2 tq + 1; + 4 for + 8
  const uint32_t sc0 = ch[p0], sc1 = ch[p0 + 4], sh0 = ch[64 + p0], sh1 = ch[64 + p0 + 4];
  a[0] = row_halo || lo_halo ? 0u : bn_relu2_packed(a[0], sc0, sh0, T{});
  a[1] = row_halo || hi_halo ? 0u : bn_relu2_packed(a[1], sc0, sh0, T{});
  a[2] = row_halo || lo_halo ? 0u : bn_relu2_packed(a[2], sc1, sh1, T{});
  a[3] = row_halo || hi_halo ? 0u : bn_relu2_packed(a[3], sc1, sh1, T{});
}

// Tile t's accumulators (output row h) rounded to T into the staging rows at stg.
template <class T>
__device__ __forceinline__ void stage_tile(const float (&acc)[64], uint8_t* stg, int h, int gid, int tq) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    float ra, rb;
    const int col = (8 * j + 2 * tq) * 2, lo = (h * kW + gid) * kRowBytes;
    *reinterpret_cast<uint32_t*>(stg + lo + col) = round2(acc[4 * j], acc[4 * j + 1], ra, rb, T{});
    *reinterpret_cast<uint32_t*>(stg + lo + 8 * kRowBytes + col) =
        round2(acc[4 * j + 2], acc[4 * j + 3], ra, rb, T{});
  }
}

// y staged at stg (rows of kRowBytes) to yimg as 16-byte vectors by `threads` threads (a multiple of 16;
// this one t), and with kSums its per-channel sums and sums of squares (of the rounded values) added to
// red[0 .. 127] and red[128 .. 255].
template <class T, bool kSums>
__device__ __forceinline__ void drain(const uint8_t* stg, uint8_t* yimg, float* red, int t, int threads) {
  const int chunk = t & 15;
  float sum[8] = {}, sq[8] = {};
#pragma unroll 4
  for (int v = t; v < kPos * 16; v += threads) {
    const int pos = v >> 4;
    const uint4 val = *reinterpret_cast<const uint4*>(stg + pos * kRowBytes + chunk * 16);
    *reinterpret_cast<uint4*>(yimg + pos * kC * 2 + chunk * 16) = val;
    if constexpr (kSums) {
      const T* e = reinterpret_cast<const T*>(&val);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float f = static_cast<float>(e[i]);
        sum[i] += f, sq[i] += f * f;
      }
    }
  }
  if constexpr (kSums) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 16);
      sq[i] += __shfl_xor_sync(0xffffffffu, sq[i], 16);
    }
    if ((t & 31) < 16)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        atomicAdd(red + chunk * 8 + i, sum[i]), atomicAdd(red + kC + chunk * 8 + i, sq[i]);
  }
}

// Element v (of the 4096 16-byte elements of a window's 16 x 16 interior positions) of the window at
// `window`: the batchnorm + relu applied in place (fp32, the apply pass's arithmetic; the halo stays zero)
// and, where app is not null, stored to the image's applied map there. v's bits: 0 the plane's parity, 1-4
// the column, 5-7 the plane pair, 8-11 the row, so 32 consecutive v are one row's 16 columns of two planes
// and a warp writes whole 32-byte pieces of the map. bn_relu2's arithmetic written per value: through its
// float2 pairs the storers' form spills at their 56 registers (ptxas -v).
template <class T>
__device__ __forceinline__ void apply_element(uint8_t* window, int v, const float* coef, uint8_t* app) {
  const int plane = 2 * ((v >> 5) & 7) + (v & 1), col = (v >> 1) & 15, row = v >> 8;
  uint4* const at = reinterpret_cast<uint4*>(window + plane * kWinPlane + ((row + 1) * kWin + col + 1) * 16);
  uint4 val = *at;
  T* e = reinterpret_cast<T*>(&val);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float f = fmaf(static_cast<float>(e[i]), coef[8 * plane + i], coef[kC + 8 * plane + i]);
    e[i] = static_cast<T>(f > 0.0f ? f : 0.0f);
  }
  *at = val;
  if (app) *reinterpret_cast<uint4*>(app + (row * kW + col) * kC * 2 + plane * 16) = val;
}

// one of v[0..3] by a runtime index (selects, not local memory)
__device__ __forceinline__ uint32_t pick4(const uint32_t (&v)[4], int i) {
  const uint32_t a = (i & 1) ? v[1] : v[0], b = (i & 1) ? v[3] : v[2];
  return (i & 2) ? b : a;
}

// A transpose within each quad of lanes: lane tq holds in v[i] its two channels (2 tq, 2 tq + 1) of 8-channel
// segment i; it gets in w[t] lane t's two channels of segment tq, i.e. the segment's 16 bytes in order.
__device__ __forceinline__ void quad_transpose(const uint32_t (&v)[4], int tq, uint32_t (&w)[4]) {
  uint32_t got[4];  // got[r]: from lane tq ^ r, its piece of segment tq (w[tq ^ r])
  got[0] = pick4(v, tq);
#pragma unroll
  for (int r = 1; r < 4; ++r) got[r] = __shfl_xor_sync(0xffffffffu, pick4(v, tq ^ r), r);
#pragma unroll
  for (int t = 0; t < 4; ++t) w[t] = pick4(got, tq ^ t);
}

// Both tiles' accumulators (output rows h0, h1) rounded to T and stored to yimg straight from registers: per
// group of four 8-channel segments a quad transpose, so that the four lanes of a position write its 64
// contiguous bytes; with kSums y's per-channel sums and sums of squares (of the rounded values) over the
// warp's positions added to red.
template <class T, bool kSums>
__device__ __forceinline__ void store_direct(const float (&acc0)[64], const float (&acc1)[64], uint8_t* yimg,
                                             float* red, int h0, int h1, int gid, int tq) {
#pragma unroll
  for (int grp = 0; grp < 4; ++grp) {
    uint32_t v[4][4];  // [tile 0 row gid, tile 0 row gid + 8, tile 1 ..., ...][segment]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * grp + i;
      float r[4][2];
      v[0][i] = round2(acc0[4 * j], acc0[4 * j + 1], r[0][0], r[0][1], T{});
      v[1][i] = round2(acc0[4 * j + 2], acc0[4 * j + 3], r[1][0], r[1][1], T{});
      v[2][i] = round2(acc1[4 * j], acc1[4 * j + 1], r[2][0], r[2][1], T{});
      v[3][i] = round2(acc1[4 * j + 2], acc1[4 * j + 3], r[3][0], r[3][1], T{});
      if constexpr (kSums) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float s = r[0][e] + r[1][e] + r[2][e] + r[3][e];
          float q = r[0][e] * r[0][e] + r[1][e] * r[1][e] + r[2][e] * r[2][e] + r[3][e] * r[3][e];
          add_over_lanes<4, 32>(s, q);  // the warp's eight gids
          if (gid == 0) atomicAdd(red + 8 * j + 2 * tq + e, s), atomicAdd(red + kC + 8 * j + 2 * tq + e, q);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t w[4];
      quad_transpose(v[c], tq, w);
      const int pos = (c < 2 ? h0 : h1) * kW + gid + 8 * (c & 1);
      *reinterpret_cast<uint4*>(yimg + pos * kC * 2 + (4 * grp + tq) * 16) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// kPrefetch: how many k16 steps' MMAs may be in flight while the next step's A fragments are loaded (and,
// with kFused, the batchnorm applied): 1 waits for the step before before preparing the next, 2 for the one
// before that (three A buffers). kStorer: the MMA warpgroups round y into the window buffer they have
// finished and go on to the next image; three warps of the producer warpgroup store it (and add its sums),
// then bring the window after next into that buffer. Else the MMA warpgroups store y themselves between
// images. kMainloop (diagnostic, timing only): no epilogue (the accumulators kept alive, y not written).
// kPacked16 (with kFused): the batchnorm in 16-bit arithmetic (apply_fragment_packed), not the apply pass's.
// kAhead (with kFused and kStorer): the storer warps apply the batchnorm to the next image's window in place
// (once per element, the halo left zero) while the MMA warpgroups compute this one, and store the applied map
// from it; the MMA warpgroups then run the plain mainloop on the applied window.
// kDirect: y stored straight from the accumulators (store_direct), its sums by the MMA warpgroups; the
// window after next is requested as soon as both have read the current one; the storers (kStorer, with
// kAhead) only apply the batchnorm to each window.
// kInterleave (with kFused and kDirect, no storers): the MMA warpgroups themselves apply the batchnorm to the
// next image's window in place (once per element, with the applied map's stores), one element a thread
// before the wgmmas of k16 steps 0 and 2 of each of the mainloop's last eight stages, in the shadow of the
// MMAs in flight (after the wgmmas, ptxas serialised them: C7513).
template <class T, bool kFused, int kPrefetch = 2, bool kStorer = true, bool kMainloop = false,
          bool kPacked16 = false, bool kAhead = false, bool kDirect = false, bool kInterleave = false>
__global__ void __launch_bounds__(kThreads, 1)
    conv128_rs_kernel(const Args args, const __grid_constant__ CUtensorMap map) {
  static_assert(kPrefetch == 1 || kPrefetch == 2, "one or two steps in flight");
  constexpr int kBufs = kPrefetch + 1, kUnroll = kBufs == 3 ? 3 : 1;  // A buffers, stages a loop turn
  extern __shared__ __align__(1024) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned base = shared_address(smem), bars = base + kOffBars;
  auto full = [&](int b) { return bars + static_cast<unsigned>(8 * b); };
  auto empty = [&](int b) { return bars + static_cast<unsigned>(8 * (kStages + b)); };
  auto win_full = [&](int b) { return bars + static_cast<unsigned>(8 * (2 * kStages + b)); };
  auto staged = [&](int b) { return bars + static_cast<unsigned>(8 * (2 * kStages + 2 + b)); };
  auto win_ready = [&](int b) { return bars + static_cast<unsigned>(8 * (2 * kStages + 4 + b)); };
  static_assert(!kAhead || (kFused && kStorer), "the storers apply the batchnorm ahead");
  static_assert(!kInterleave || (kFused && kDirect && !kStorer && !kAhead),
                "kInterleave: fused, direct alone");
  constexpr bool kInRegisters =
      kFused && !kAhead && !kInterleave;                 // the batchnorm applied to the A fragments
  constexpr int kFirstApplyStage = kStagesPerImage - 8;  // kInterleave: stages 10-17
  const int my_images =
      static_cast<int>(blockIdx.x) < args.n ? (args.n - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto image = [&](int k) { return static_cast<int>(blockIdx.x + k * gridDim.x); };
  auto load_window = [&](int k) {  // image k's window into buffer k % 2 (one thread)
    const int b = k & 1;
    mbar_arrive_expect_tx(win_full(b), 16 * kPlaneTx);
    for (int c = 0; c < 16; ++c)
      tma_load_4d(base + static_cast<unsigned>(b * kWinBytes + c * kWinPlane), &map, 8 * c, -1, -1, image(k),
                  win_full(b));
  };
  auto applied_of = [&](int k) {  // image k's applied map (kAhead, kInterleave), or null
    return args.applied ? static_cast<uint8_t*>(args.applied) + static_cast<int64_t>(image(k)) * kPos * kC * 2
                        : nullptr;
  };
  auto y_of = [&](int k) {
    return static_cast<uint8_t*>(args.y) + static_cast<int64_t>(image(k)) * kPos * kC * 2;
  };
  float* const coef = reinterpret_cast<float*>(smem + kOffCoef);
  float* const red = reinterpret_cast<float*>(smem + kOffRed);
  if (threadIdx.x == 0) {
    for (int b = 0; b < kStages; ++b) mbar_init(full(b), 1), mbar_init(empty(b), 256);
    for (int b = 0; b < 2; ++b)
      mbar_init(win_full(b), 1), mbar_init(staged(b), 256), mbar_init(win_ready(b), 96);
    mbar_init_fence();
  }
  if (kFused && threadIdx.x < kC) {
    coef[threadIdx.x] = args.scale[threadIdx.x], coef[kC + threadIdx.x] = args.shift[threadIdx.x];
    red[threadIdx.x] = 0.0f, red[kC + threadIdx.x] = 0.0f;
  }
  uint32_t* const coef16 = reinterpret_cast<uint32_t*>(smem + kOffCoef16);
  if (kFused && kPacked16 && threadIdx.x < kC) {  // pairs of T: scale at [0, 64), shift at [64, 128)
    const int c = 2 * (threadIdx.x & 63), hi = threadIdx.x >> 6;
    const float* src = hi ? args.shift : args.scale;
    const T pair[2] = {static_cast<T>(src[c]), static_cast<T>(src[c + 1])};
    coef16[threadIdx.x] = *reinterpret_cast<const uint32_t*>(pair);
  }
  __syncthreads();
  if (warp >= 8) {
    lower_registers<56>();
    if (warp == 8) {  // ---- producer: the weights' 18 stages for each image, in order
      if (lane == 0)
        for (int q = 0; q < my_images * kStagesPerImage; ++q) {
          const int b = q % kStages;
          if (q >= kStages) mbar_wait(empty(b), ((q / kStages) - 1) & 1);
          mbar_arrive_expect_tx(full(b), kStageBytes);
          bulk_load(base + static_cast<unsigned>(kOffStages + b * kStageBytes),
                    static_cast<const uint8_t*>(args.wperm) + (q % kStagesPerImage) * kStageBytes,
                    kStageBytes, full(b));
        }
      return;
    }
    if constexpr (kStorer) {  // ---- storers (warps 9-11): each image's y, then the window after next
      const int t = threadIdx.x - 288;
      // image k's window: the batchnorm + relu applied in place at its 16 x 16 positions (a warp on one row's
      // 16 columns of two planes: whole 32-byte pieces of the applied map), then handed to the MMA warpgroups
      auto apply_ahead = [&](int k) {
        const int b = k & 1;
        mbar_wait(win_full(b), (k >> 1) & 1);
        // (unrolled by 4: slower, 101 / 100 us in call 5)
        for (int v = t; v < (args.handoff_only ? 0 : kPos * 16); v += 96)
          apply_element<T>(smem + b * kWinBytes, v, coef, applied_of(k));
        mbar_arrive(win_ready(b));
      };
      if constexpr (kDirect) {
        for (int k = 0; k < my_images; ++k)
          if (kAhead) apply_ahead(k);
        return;
      }
      if constexpr (kAhead)
        if (my_images > 0) apply_ahead(0);
      for (int k = 0; k < my_images; ++k) {
        const int b = k & 1;
        if constexpr (kAhead)
          if (k + 1 < my_images) apply_ahead(k + 1);
        mbar_wait(staged(b), (k >> 1) & 1);
        if (!kMainloop) drain<T, kFused>(smem + b * kWinBytes, y_of(k), red, t, 96);
        fence_proxy_async();  // the staging's reads before the next window's copy into the buffer
        named_sync(2, 96);
        if (t == 0 && k + 2 < my_images) load_window(k + 2);
      }
      if (kFused)
        for (int c = t; c < kC; c += 96) {
          double* part = args.part + static_cast<int64_t>(blockIdx.x) * kC * 2;
          part[2 * c] = red[c], part[2 * c + 1] = red[kC + c];
        }
    }
    return;
  }
  // ---- MMA warpgroups
  raise_registers<224>();
  if (threadIdx.x == 0)
    for (int k = 0; k < 2 && k < my_images; ++k) load_window(k);
  const int g = warp >> 2, wq = warp & 3, gid = lane >> 2, tq = lane & 3;
  const int h0 = 8 * g + wq, h1 = h0 + 4;  // the output rows of this warp's tiles 0 and 1
  // this lane's ldmatrix row: column lane & 15 of its tile's row, chunk plane lane >> 4 of the k16 step
  const unsigned lane_off = static_cast<unsigned>((lane >> 4) * kWinPlane + (lane & 15) * 16);
  const unsigned off0 = lane_off + h0 * kWin * 16, off1 = lane_off + h1 * kWin * 16;
  float acc0[64], acc1[64];
  uint32_t af[kBufs][2][4];
  if constexpr (kInterleave) {  // the first image's window, before its mainloop
    if (my_images > 0) {
      mbar_wait(win_full(0), 0);
      for (int i = 0; i < 16; ++i) apply_element<T>(smem, threadIdx.x + 256 * i, coef, applied_of(0));
      named_sync(1, 256);
    }
  }
  for (int k = 0; k < my_images; ++k) {
    const int b = k & 1, q0 = k * kStagesPerImage;
    const unsigned win = base + static_cast<unsigned>(b * kWinBytes);
    // step (st, kk)'s A fragments of both tiles into af[i]
    auto prep = [&](int i, int st, int kk) {
      const int tap = st >> 1, r = tap / 3, s = tap - 3 * r;
      const unsigned koff = static_cast<unsigned>((8 * (st & 1) + 2 * kk) * kWinPlane + (r * kWin + s) * 16);
      ldmatrix_x4(af[i][0], win + off0 + koff);
      ldmatrix_x4(af[i][1], win + off1 + koff);
      if constexpr (kInRegisters) {
        const bool lo_halo = s == 0 && gid == 0, hi_halo = s == 2 && gid == 7;
        const bool halo0 = h0 + r == 0 || h0 + r == kWin - 1, halo1 = h1 + r == 0 || h1 + r == kWin - 1;
        if constexpr (kPacked16) {
          apply_fragment_packed<T>(af[i][0], coef16, st, kk, tq, halo0, lo_halo, hi_halo);
          apply_fragment_packed<T>(af[i][1], coef16, st, kk, tq, halo1, lo_halo, hi_halo);
        } else {
          apply_fragment<T>(af[i][0], coef, st, kk, tq, halo0, lo_halo, hi_halo);
          apply_fragment<T>(af[i][1], coef, st, kk, tq, halo1, lo_halo, hi_halo);
        }
      }
    };
    mbar_wait(kAhead ? win_ready(b) : win_full(b), (k >> 1) & 1);
    prep(0, 0, 0);
#pragma unroll 1
    for (int st0 = 0; st0 < kStagesPerImage; st0 += kUnroll) {
#pragma unroll
      for (int j = 0; j < 4 * kUnroll; ++j) {
        const int st = st0 + j / 4, kk = j % 4, q = q0 + st;
        if constexpr (kInterleave) {  // two elements of the next image's window
          if ((kk & 1) == 0 && st >= kFirstApplyStage && k + 1 < my_images) {  // one at kk 0, one at kk 2
            if (st == kFirstApplyStage && kk == 0) mbar_wait(win_full(b ^ 1), ((k + 1) >> 1) & 1);
            apply_element<T>(smem + (b ^ 1) * kWinBytes,
                             threadIdx.x + 256 * (2 * (st - kFirstApplyStage) + kk / 2), coef,
                             applied_of(k + 1));
          }
        }
        if (kk == 0) mbar_wait(full(q % kStages), (q / kStages) & 1);
        wg_fence();
        const uint64_t desc = smem_desc(
            base + static_cast<unsigned>(kOffStages + (q % kStages) * kStageBytes + kk * 4096), 2048, 128);
        const int accumulate = st > 0 || kk > 0;
        wgmma128(acc0, af[j % kBufs][0], desc, accumulate, T{});
        wgmma128(acc1, af[j % kBufs][1], desc, accumulate, T{});
        wg_commit();
        wg_wait<kPrefetch>();  // step ks - kPrefetch is done: its stage may go, its A buffer is free
        if (kk == kPrefetch - 1 && st > 0) mbar_arrive(empty((q - 1) % kStages));
        if (st < kStagesPerImage - 1 || kk < 3) prep((j + 1) % kBufs, kk == 3 ? st + 1 : st, (kk + 1) % 4);
      }
    }
    wg_wait<0>();
    fence_regs(acc0);
    fence_regs(acc1);
    mbar_arrive(empty((q0 + kStagesPerImage - 1) % kStages));
    uint8_t* const stg = smem + b * kWinBytes;
    if constexpr (kDirect && !kMainloop) {
      fence_proxy_async();  // this thread's reads of window b before the copy of the window after next
      named_sync(1, 256);   // both warpgroups have finished reading window b (and applying the next)
      if (threadIdx.x == 0 && k + 2 < my_images) load_window(k + 2);
      store_direct<T, kFused>(acc0, acc1, y_of(k), red, h0, h1, gid, tq);
      continue;
    }
    named_sync(1, 256);         // both warpgroups have finished reading window b
    if constexpr (kMainloop) {  // keep the accumulators alive (ptxas drops MMAs whose results go unused)
      float keep = 0.0f;
#pragma unroll
      for (int i = 0; i < 64; ++i) keep += acc0[i] + acc1[i];
      if (keep == 12345.0f) static_cast<T*>(args.y)[threadIdx.x] = static_cast<T>(keep);
    } else {
      stage_tile<T>(acc0, stg, h0, gid, tq);
      stage_tile<T>(acc1, stg, h1, gid, tq);
    }
    if constexpr (kStorer) {
      mbar_arrive(staged(b));
      continue;
    }
    named_sync(1, 256);
    if (!kMainloop) drain<T, kFused>(stg, y_of(k), red, threadIdx.x, 256);
    fence_proxy_async();  // the staging's reads before the next window's copy into the buffer
    named_sync(1, 256);
    if (threadIdx.x == 0 && k + 2 < my_images) load_window(k + 2);
  }
  if (kFused && (!kStorer || kDirect)) {
    named_sync(1, 256);
    if (threadIdx.x < kC) {
      double* part = args.part + static_cast<int64_t>(blockIdx.x) * kC * 2;
      part[2 * threadIdx.x] = red[threadIdx.x], part[2 * threadIdx.x + 1] = red[kC + threadIdx.x];
    }
  }
}

}  // namespace fresco::bench::rs
