// Probe: can fresco's own warpgroup-MMA kernel run ResNet-18's stage-2 convolution (3x3, stride 1, pad 1,
// 128 -> 128 channels, 16x16 maps, NHWC fp16 / bf16) as fast as cuDNN? The stage-1 kernel
// (ops/conv3x3_wgmma.h) holds all 64 x 576 weights in registers; at 128 channels they are 288 KB, more than a
// block's registers or shared memory. Both layouts here give a block 64 output channels (blocks 2 i and 2 i +
// 1 the two halves of tiles i, i + grid / 2, ...) and compute a tile of 4 output rows of one image as 72
// positions (rows of 16 padded to the window's 18 columns, wgmma m64n72k16, the two padding columns computed
// and dropped) from a window of 6 x 18 positions x 128 channels that TMA brings as 16 chunk planes (halo
// zero-filled):
//   conv128_kernel: the two MMA warpgroups each hold the weights of half the input channels (64 x 576, as
//     stage 1) in registers and compute the same tile; one hands its accumulators to the other through shared
//     memory, which adds, rounds and stores (variants: which warpgroup stores, buffers, staged stores, and
//     diagnostic forms without stores or without the reduction).
//   conv128_ss_kernel: the block's 64 x 1152 weights in shared memory, both operands from shared memory, each
//     MMA warpgroup on its own tiles over all of k; staged 16-byte stores; optionally (kFused) with a
//     batchnorm + relu applied to each window in place before its MMAs (the applied map stored, as the
//     stage-1 kernel's prologue) and y's per-channel sums for the next batchnorm.
//     kProducer: the producer warpgroup's other 127 threads apply that batchnorm to each window (after TMA,
//     before the MMA warpgroup takes it), beside the MMA warpgroups' epilogues.
// Each is checked against a direct fp32-accumulating kernel (the fused form on the applied map, its applied
// map bit for bit, its sums against the host's of its own y); cuDNN timed with the legacy API's fastest
// algorithm on the same buffers.
// Measured on an H100 (bench/results/2026-12-05_session33.json, calls 6-15): registers 96-98 us (86-88 with
// staged stores; the MMA loop alone 76-77), weights in shared memory 75.4-75.8 us (510 TFLOP/s), 71.1-72.4
// with turns (call 13: 534-544 TFLOP/s), against 64-65 us for the step's cuDNN engine (the legacy API's
// timings varied from 67 to 126 us between calls; 68-71 in call 13). The fused form (calls 14-15): the sums
// add 3-4 us, the in-place prologue 33-38 (on each tile's critical path: one window buffer per warpgroup),
// and the applied map's stores 112 more (220 us in all): consecutive lanes store 16 bytes of one plane at
// 256-byte strides, so every 32-byte piece was written half at a time; with whole pieces (a warp's halves on
// two planes of the same positions) the fused form takes 135.7 / 134.1 us fp16 / bf16 (H100, thirty-eighth
// session; 137.0 / 136.4 on the thirty-ninth's H200), the producer form 149.1 / 147.8. A third layout (three
// window buffers in one 5-d TMA box, the prologue of tile k + 2 beside tile k's MMAs) was correct and slower
// on the H200 (fused 163.2 / 166.8 us): removed, kept in git history (commit 018bd90) and docs/decisions.md.
// The next layout, positions as wgmma's M and the activations as A from registers, has its own probe
// (bench/conv128_rs_probe.cu; fortieth session: the plain convolution at cuDNN's speed).
// A diagnostic, not part of the product.
//
// Usage: bench_conv128_probe [--batch 512] [--dtype fp16|bf16] [--reps 20]
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/mma_sync.cuh"
#include "ops/wgmma.cuh"
#include "probe_common.h"
// after probe_common.h (check, CK)
#include "conv128_common.cuh"

namespace {

using fresco::bench::check;

using namespace fresco::cuda;  // NOLINT: the sm_90a building blocks (wgmma.cuh, mma_sync.cuh)

using fresco::bench::conv128::kC;  // in = out channels 128, row width 16, k = 9 x 128
using fresco::bench::conv128::kKDim;
using fresco::bench::conv128::kW;
using fresco::bench::conv128::reference_kernel;
using fresco::bench::conv128::tiled_map;
constexpr int kHalf = 64;                                          // output channels a block computes
constexpr int kRows = 4, kWinRows = kRows + 2, kWinCols = kW + 2;  // a tile and its window
constexpr int kN = kRows * kWinCols;                               // 72 positions computed per tile
// One chunk plane: 8 channels of the window's positions (6 x 18 = 108, and 4 more that only the dropped
// padding columns read), 16 bytes each; 1792 bytes, a multiple of TMA's 128-byte alignment.
constexpr int kCS = 112, kPlanes = kC / 8, kPlaneBytes = kCS * 16, kBufBytes = kPlanes * kPlaneBytes;
constexpr int kWinBytes = kPlanes * kWinRows * kWinCols * 16;  // what TMA brings per window
constexpr int kRedBytes = 128 * (kN / 2) * 4;                  // one warpgroup's accumulators, thread-major
// Two MMA warpgroups; thread 0 also issues the windows' copies. A ninth warp would cap a thread at 168
// registers (each of the SM's four register banks of 16K serves two or three warps), too few for the 144
// weight registers and 36 accumulators.
constexpr int kThreads = 256;
// A storing warpgroup's staging buffer: the tile's 64 positions x 64 channels, rows of 72 T (144 bytes:
// the 16-bit stores of a warp's lanes fall on distinct banks).
constexpr int kStageStride = kHalf + 8, kStageBytes = 4 * kW * kStageStride * 2;
// window buffers, two reduction slots, two staging buffers, barriers: full / empty per buffer, reduction
// full / empty per slot
constexpr size_t smem_bytes(int bufs) {
  return bufs * kBufBytes + 2 * kRedBytes + 2 * kStageBytes + (2 * bufs + 4) * 8;
}

// wgmma m64n72k16's 36 accumulator operands
#define FR_D36                                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FR_WGMMA72_ASM(TYPE)                                                                                 \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %41, 0;\nwgmma.mma_async.sync.aligned.m64n72k16.f32." TYPE "." TYPE  \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
      "%27,%28,%29,%30,%31,%32,%33,%34,%35}, {%36,%37,%38,%39}, %40, p, 1, 1, 0;\n}\n"                       \
      : FR_D36                                                                                               \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#else
#define FR_WGMMA72_ASM(TYPE) (void)0
#endif
__device__ __forceinline__ void wgmma72(float (&d)[36], const uint32_t (&a)[4], uint64_t desc, int accumulate,
                                        __half) {
  FR_WGMMA72_ASM("f16");
}
__device__ __forceinline__ void wgmma72(float (&d)[36], const uint32_t (&a)[4], uint64_t desc, int accumulate,
                                        __nv_bfloat16) {
  FR_WGMMA72_ASM("bf16");
}

// This thread's A fragments for output channels o and o + 8 (of 128) over input channels 64 g .. 64 g + 63 of
// every tap: k-step ks = 4 tap + kk holds k = tap * 128 + 64 g + 16 kk + 2 tq (+1, +8, +9).
template <class T>
__device__ __forceinline__ void load_weights(const T* w, int o, int g, int tq, uint32_t (&a)[36][4]) {
  const auto* w16 = reinterpret_cast<const uint16_t*>(w);
  auto pair = [&](int out, int k) { return *reinterpret_cast<const uint32_t*>(w16 + out * kKDim + k); };
#pragma unroll
  for (int ks = 0; ks < 36; ++ks) {
    const int k = (ks / 4) * kC + 64 * g + 16 * (ks % 4) + 2 * tq;
    a[ks][0] = pair(o, k), a[ks][1] = pair(o + 8, k), a[ks][2] = pair(o, k + 8),
    a[ks][3] = pair(o + 8, k + 8);
  }
}

// The tiles a block takes: blocks 2 i and 2 i + 1 take output channels 0-63 (half 0) and 64-127 of tiles i,
// i + grid / 2, ... (an even grid); tile t is 4 output rows of one image.
struct TileSplit {
  int half, bi, nb, tiles_per_img, my_tiles;
  __device__ TileSplit(int n, int h)
      : half(blockIdx.x & 1), bi(blockIdx.x >> 1), nb(gridDim.x >> 1), tiles_per_img(h / kRows) {
    const int tiles = n * tiles_per_img;
    my_tiles = bi < tiles ? (tiles - bi + nb - 1) / nb : 0;
  }
  __device__ int tile(int k) const { return bi + k * nb; }  // the block's k-th tile
  __device__ int image(int t) const { return t / tiles_per_img; }
  __device__ int row0(int t) const { return (t % tiles_per_img) * kRows; }
};

// A storing warpgroup's tile (acc[4 j + 2 mh + e]: output channel 16 wq + gid + 8 mh of the block's 64,
// computed position 8 j + 2 tq + e) rounded to T into its staging buffer st (the padding columns dropped),
// on_value(mh, v) seeing each stored value, then written to yb (the tile's first position at the block's 64
// channels) as 16-byte vectors. Named barrier 1 + g among the warpgroup's 128 threads.
// f(position in the tile, mh, value) for each of this thread's accumulators at a stored position (columns
// 16 and 17 of each row are the padding's, dropped).
template <class F>
__device__ __forceinline__ void for_each_stored(const float (&acc)[36], int tq, F f) {
#pragma unroll
  for (int j = 0; j < 9; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int p = 8 * j + 2 * tq + e, row = p / kWinCols, col = p % kWinCols;
      if (col >= kW) continue;
#pragma unroll
      for (int mh = 0; mh < 2; ++mh) f(row * kW + col, mh, acc[4 * j + 2 * mh + e]);
    }
}

template <class T, class OnValue>
__device__ __forceinline__ void stage_and_store(const float (&acc)[36], T* st, T* yb, int g, int wq, int gid,
                                                int tq, int t128, OnValue on_value) {
  named_sync(1 + g, 128);  // this warpgroup's threads have read its previous tile out of the buffer
  for_each_stored(acc, tq, [&](int pos, int mh, float a) {
    const T v = static_cast<T>(a);
    st[pos * kStageStride + 16 * wq + gid + 8 * mh] = v;
    on_value(mh, v);
  });
  named_sync(1 + g, 128);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int v = t128 + 128 * q, pos = v >> 3, cv = v & 7;
    *reinterpret_cast<uint4*>(yb + pos * kC + 8 * cv) =
        *reinterpret_cast<const uint4*>(st + pos * kStageStride + 8 * cv);
  }
}

// Persistent blocks (TileSplit).
// kBufs window buffers. kMode (diagnostics, timing only): 0 the convolution; 1 without the stores of y; 2 the
// MMAs alone (no reduction, no stores); 3 as 2 with every B tile read from a 128-byte aligned start.
// kAlternate: the warpgroups take turns adding the two halves and storing the tile (tile k by warpgroup k %
// 2); else warpgroup 0 does it for every tile. kStaged: the storer rounds the tile into its staging buffer
// and stores it as 16-byte vectors (whole 128-byte lines of its 64 channels); else each thread stores its
// values as 2-byte writes from the accumulators.
template <class T, bool kAlternate, int kBufs = 4, int kMode = 0, bool kStaged = false>
__global__ void __launch_bounds__(kThreads, 1)
    conv128_kernel(const T* __restrict__ w, T* __restrict__ y, int n, int h,
                   const __grid_constant__ CUtensorMap map) {
  extern __shared__ __align__(1024) uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const TileSplit ts(n, h);
  const int half = ts.half, my_tiles = ts.my_tiles;
  const unsigned base = shared_address(smem);
  const unsigned red_base = base + kBufs * kBufBytes;
  const unsigned bars = red_base + 2 * kRedBytes + 2 * kStageBytes;
  auto buf = [&](int b) { return base + static_cast<unsigned>(b * kBufBytes); };
  auto full = [&](int b) { return bars + static_cast<unsigned>(b * 8); };
  auto empty = [&](int b) { return bars + static_cast<unsigned>((kBufs + b) * 8); };
  auto red_full = [&](int s) { return bars + static_cast<unsigned>((2 * kBufs + s) * 8); };
  auto red_empty = [&](int s) { return bars + static_cast<unsigned>((2 * kBufs + 2 + s) * 8); };
  if (threadIdx.x == 0) {
    for (int b = 0; b < kBufs; ++b) mbar_init(full(b), 1), mbar_init(empty(b), 256);
    for (int s = 0; s < 2; ++s) mbar_init(red_full(s), 128), mbar_init(red_empty(s), 128);
    mbar_init_fence();
  }
  // tile k's window into buffer k % kBufs (thread 0)
  auto load = [&](int k) {
    const int b = k % kBufs, t = ts.tile(k);
    const int img = ts.image(t), row0 = ts.row0(t);
    mbar_arrive_expect_tx(full(b), kWinBytes);
    for (int c = 0; c < kPlanes; ++c)
      tma_load_4d(buf(b) + static_cast<unsigned>(c * kPlaneBytes), &map, 8 * c, -1, row0 - 1, img, full(b));
  };
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 0; k < kBufs && k < my_tiles; ++k) load(k);
  // ---- MMA warpgroup g: input channels 64 g .. 64 g + 63
  const int wq = warp & 3, gid = lane >> 2, tq = lane & 3, t128 = threadIdx.x & 127;
  uint32_t a[36][4];
  load_weights<T>(w, kHalf * half + 16 * wq + gid, g, tq, a);
  float* red = reinterpret_cast<float*>(reinterpret_cast<char*>(smem) + kBufs * kBufBytes);
  float acc[36];
  for (int k = 0; k < my_tiles; ++k) {
    const int b = k % kBufs, t = ts.tile(k), s = k & 1;
    // tile k - 1's buffer, which both warpgroups left before their reduction, takes tile k - 1 + kBufs
    if (threadIdx.x == 0 && k >= 1 && k - 1 + kBufs < my_tiles) {
      mbar_wait(empty((k - 1) % kBufs), ((k - 1) / kBufs) & 1);
      load(k - 1 + kBufs);
    }
    __syncwarp();
    mbar_wait(full(b), (k / kBufs) & 1);
    // B: 16 channels x 72 positions at window position r * 18 + c, planes 8 g + 2 kk and + 1 (LBO a plane,
    // SBO 8 positions)
    const uint64_t lo = static_cast<uint64_t>((buf(b) >> 4) & 0x3FFF) |
                        (static_cast<uint64_t>(kPlaneBytes >> 4) << 16) |
                        (static_cast<uint64_t>(128 >> 4) << 32);
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < 36; ++ks) {
      const int tap = ks / 4, kk = ks % 4, r = tap / 3, c = tap % 3;
      // kMode 3 (timing only, wrong values): every B tile at its plane's first position, 128-byte aligned
      const uint64_t desc =
          lo + static_cast<uint64_t>((8 * g + 2 * kk) * kCS + (kMode == 3 ? 0 : r * kWinCols + c));
      wgmma72(acc, a[ks], desc, ks > 0, T{});
    }
    wg_commit();
    wg_wait<0>();
    fence_regs(acc);
    mbar_arrive(empty(b));
    if (kMode >= 2) {  // keep the accumulators alive (ptxas drops MMAs whose results go unused)
      float keep = 0.0f;
#pragma unroll
      for (int i = 0; i < 36; ++i) keep += acc[i];
      if (keep == 12345.0f) y[t128] = static_cast<T>(keep);
      continue;
    }
    float* slot = red + s * (kRedBytes / 4);
    const int storer = kAlternate ? (k & 1) : 0;
    if (g != storer) {  // hand the accumulators to the warpgroup that stores this tile
      if (k >= 2) mbar_wait(red_empty(s), ((k >> 1) - 1) & 1);
#pragma unroll
      for (int i = 0; i < 36; ++i) slot[i * 128 + t128] = acc[i];
      mbar_arrive(red_full(s));
      continue;
    }
    mbar_wait(red_full(s), (k >> 1) & 1);
#pragma unroll
    for (int i = 0; i < 36; ++i) acc[i] += slot[i * 128 + t128];
    mbar_arrive(red_empty(s));
    if (kMode == 1) {  // keep the sums alive without storing them
      float keep = 0.0f;
#pragma unroll
      for (int i = 0; i < 36; ++i) keep += acc[i];
      if (keep == 12345.0f) y[t128] = static_cast<T>(keep);
      continue;
    }
    // acc[4 j + 2 mh + e]: output channel 64 half + 16 wq + gid + 8 mh, computed position 8 j + 2 tq + e
    const int img = ts.image(t), row0 = ts.row0(t);
    if constexpr (kStaged) {
      T* st = reinterpret_cast<T*>(reinterpret_cast<char*>(red) + 2 * kRedBytes + g * kStageBytes);
      stage_and_store(acc, st, y + ((static_cast<int64_t>(img) * h + row0) * kW) * kC + kHalf * half, g, wq,
                      gid, tq, t128, [](int, T) {});
      continue;
    }
    T* yt = y + ((static_cast<int64_t>(img) * h + row0) * kW) * kC + kHalf * half + 16 * wq + gid;
    for_each_stored(acc, tq, [&](int pos, int mh, float a) { yt[pos * kC + 8 * mh] = static_cast<T>(a); });
  }
}

// The second layout: the block's 64 x 1152 weights in shared memory (147 KB, brought once by TMA as 144
// chunks of 8 k x 64 outputs: A descriptors step 1024 bytes along k, 128 along the outputs), both operands of
// wgmma m64n72k16 from shared memory, and each MMA warpgroup on its own tiles over all 1152 k (72 wgmmas a
// tile, one window buffer each: shared memory has room for two), so one warpgroup's epilogue runs beside the
// other's MMAs and nothing is added between warpgroups. 384 threads: warpgroup 2's first thread issues the
// copies. Stores staged as in conv128_kernel.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FR_WGMMA72_SS_ASM(TYPE)                                                                              \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\nwgmma.mma_async.sync.aligned.m64n72k16.f32." TYPE "." TYPE  \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
      "%27,%28,%29,%30,%31,%32,%33,%34,%35}, %36, %37, p, 1, 1, 0, 0;\n}\n"                                  \
      : FR_D36                                                                                               \
      : "l"(a_desc), "l"(desc), "r"(accumulate))
#else
#define FR_WGMMA72_SS_ASM(TYPE) (void)0
#endif
__device__ __forceinline__ void wgmma72_ss(float (&d)[36], uint64_t a_desc, uint64_t desc, int accumulate,
                                           __half) {
  FR_WGMMA72_SS_ASM("f16");
}
__device__ __forceinline__ void wgmma72_ss(float (&d)[36], uint64_t a_desc, uint64_t desc, int accumulate,
                                           __nv_bfloat16) {
  FR_WGMMA72_SS_ASM("bf16");
}
constexpr int kWeightBytes = kHalf * kKDim * 2;  // 147456
constexpr size_t kSsSmem = kWeightBytes + 2 * kBufBytes + 2 * kStageBytes + 7 * 8 + 2 * kC * 4;
// The batchnorm around the convolution (kFused): x is the input of a batchnorm with fused relu whose scale
// and shift per channel (f32 [128] each) the kernel applies to each window before its MMAs (the padding
// stays zero), storing the applied map (the blocks of output half 0) as the batchnorm's apply pass would; and
// it writes per block the sums and sums of squares of y as stored for the next batchnorm (double, [block][64
// channels][2]).
struct Fused {
  const float *scale, *shift;
  void* applied;
  double* part;
};
constexpr int kSsThreads = 384;

// The batchnorm + relu applied in place to a window buffer by 128 threads (thread t), and the applied map
// stored (store_applied, by the blocks of output half 0) at the tile's own rows: 16 lanes on 16 positions of
// one plane, the next 16 lanes on the next plane, so each 32-byte piece of the applied map is written whole
// by one store instruction (positions 108-111 are past the window; the padding stays zero).
template <class T>
__device__ __forceinline__ void apply_window(const Fused& fz, const float* coef, char* window, int t,
                                             int half, int img, int row0, int h, bool store_applied) {
  uint4* wv = reinterpret_cast<uint4*>(window);
  T* applied = static_cast<T*>(fz.applied);
  for (int v = t; v < kPlanes * kCS; v += 128) {
    const int grp = v >> 4, c = grp % kPlanes, pos = 16 * (grp / kPlanes) + (v & 15);
    const int wr = pos / kWinCols, wc = pos - wr * kWinCols, ir = row0 - 1 + wr, ic = wc - 1;
    if (pos >= kWinRows * kWinCols || ir < 0 || ir >= h || ic < 0 || ic >= kW) continue;
    uint4 val = wv[c * kCS + pos];
    T* e = reinterpret_cast<T*>(&val);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float f = fmaf(static_cast<float>(e[j]), coef[8 * c + j], coef[kC + 8 * c + j]);
      e[j] = static_cast<T>(f > 0.0f ? f : 0.0f);
    }
    wv[c * kCS + pos] = val;
    if (store_applied && half == 0 && wr >= 1 && wr <= kRows)
      *reinterpret_cast<uint4*>(applied + ((static_cast<int64_t>(img) * h + ir) * kW + ic) * kC + 8 * c) =
          val;
  }
}

// One tile's 72 wgmmas (k = 128 tap + 16 kk) over the window at shared address win, planes kCS positions
// apart (B: LBO one plane, SBO 8 positions), A from the weights' descriptor a_lo; committed, not waited.
template <class T>
__device__ __forceinline__ void tile_mmas(float (&acc)[36], uint64_t a_lo, unsigned win) {
  const uint64_t lo = static_cast<uint64_t>((win >> 4) & 0x3FFF) |
                      (static_cast<uint64_t>((kCS * 16) >> 4) << 16) |
                      (static_cast<uint64_t>(128 >> 4) << 32);
  wg_fence();
#pragma unroll
  for (int ks = 0; ks < 72; ++ks) {
    const int tap = ks / 8, kk = ks % 8, r = tap / 3, c = tap % 3;
    const uint64_t a_desc = a_lo + static_cast<uint64_t>((tap * 16 + 2 * kk) * (1024 >> 4));
    const uint64_t desc = lo + static_cast<uint64_t>(2 * kk * kCS + r * kWinCols + c);
    wgmma72_ss(acc, a_desc, desc, ks > 0, T{});
  }
  wg_commit();
}

// The block's sums of y and y^2 per channel (this thread's dsum / dsq: channels 16 wq + gid (+ 8) as stored)
// into part[block][64][2]: the four lanes of a gid, then the two warpgroups in order through red ([2][64][2]
// doubles of shared memory neither warpgroup uses any more once both reach named barrier 7).
__device__ __forceinline__ void block_sums(double (&dsum)[2], double (&dsq)[2], double* red, double* part,
                                           int g, int wq, int gid, int tq, int t128) {
#pragma unroll
  for (int mh = 0; mh < 2; ++mh)
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      dsum[mh] += __shfl_xor_sync(0xffffffffu, dsum[mh], o);
      dsq[mh] += __shfl_xor_sync(0xffffffffu, dsq[mh], o);
    }
  named_sync(7, 256);
  if (tq == 0)
#pragma unroll
    for (int mh = 0; mh < 2; ++mh) {
      const int c = 16 * wq + gid + 8 * mh;
      red[(g * kHalf + c) * 2] = dsum[mh], red[(g * kHalf + c) * 2 + 1] = dsq[mh];
    }
  named_sync(7, 256);
  if (g == 0 && t128 < kHalf) {
    part[(static_cast<int64_t>(blockIdx.x) * kHalf + t128) * 2] = red[t128 * 2] + red[(kHalf + t128) * 2];
    part[(static_cast<int64_t>(blockIdx.x) * kHalf + t128) * 2 + 1] =
        red[t128 * 2 + 1] + red[(kHalf + t128) * 2 + 1];
  }
}

// kParts (diagnostics, with kFused): 3 all of it; 1 the prologue without storing the applied map; 2 the sums
// without the prologue.
// kTurns: the two MMA warpgroups take turns issuing their tiles' MMAs (named barriers 3 and 4, as the
// stage-1 kernel's rows), so that one's epilogue runs while the other's MMAs are queued.
// kProducer (with kFused): the producer warpgroup's 128 threads apply the prologue to each window once TMA
// has brought it and then hand it to its MMA warpgroup (barrier ready), so the prologue runs beside the
// MMA warpgroup's epilogue instead of after it.
template <class T, bool kTurns = false, bool kFused = false, int kParts = 3, bool kProducer = false>
__global__ void __launch_bounds__(kSsThreads, 1)
    conv128_ss_kernel(T* __restrict__ y, int n, int h, const __grid_constant__ CUtensorMap map,
                      const __grid_constant__ CUtensorMap wmap, const Fused fz) {
  extern __shared__ __align__(1024) uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const TileSplit ts(n, h);
  const int half = ts.half, my_tiles = ts.my_tiles;
  const unsigned wbase = shared_address(smem);
  const unsigned base = wbase + kWeightBytes;  // window buffers 0, 1 (warpgroup g's is g)
  T* const stage_base = reinterpret_cast<T*>(reinterpret_cast<char*>(smem) + kWeightBytes + 2 * kBufBytes);
  const unsigned bars = shared_address(stage_base) + 2 * kStageBytes;
  auto buf = [&](int b) { return base + static_cast<unsigned>(b * kBufBytes); };
  auto full = [&](int b) { return bars + static_cast<unsigned>(b * 8); };
  auto empty = [&](int b) { return bars + static_cast<unsigned>((2 + b) * 8); };
  const unsigned wbar = bars + 32;
  auto ready = [&](int b) { return bars + static_cast<unsigned>((5 + b) * 8); };
  float* const coef = reinterpret_cast<float*>(reinterpret_cast<char*>(stage_base) + 2 * kStageBytes + 56);
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) mbar_init(full(b), 1), mbar_init(empty(b), 128), mbar_init(ready(b), 1);
    mbar_init(wbar, 1);
    mbar_init_fence();
  }
  if (kFused && threadIdx.x < kC)
    coef[threadIdx.x] = fz.scale[threadIdx.x], coef[kC + threadIdx.x] = fz.shift[threadIdx.x];
  __syncthreads();
  if (g == 2) {  // ---- producer: the weights once, then each tile's window into its warpgroup's buffer
    constexpr bool kApplies = kFused && kProducer && (kParts & 1);
    const int p = threadIdx.x - 256;
    if (!kApplies && p != 0) return;
    if (p == 0) {
      mbar_arrive_expect_tx(wbar, kWeightBytes);
      for (int kc = 0; kc < kKDim / 8; ++kc)
        tma_load_2d(wbase + static_cast<unsigned>(kc * 1024), &wmap, 8 * kc, kHalf * half, wbar);
    }
    for (int k = 0; k < my_tiles; ++k) {  // local tile k: warpgroup k % 2, buffer k % 2
      const int b = k & 1, t = ts.tile(k);
      const int img = ts.image(t), row0 = ts.row0(t);
      if (p == 0) {
        if (k >= 2) mbar_wait(empty(b), ((k >> 1) - 1) & 1);
        mbar_arrive_expect_tx(full(b), kWinBytes);
        for (int c = 0; c < kPlanes; ++c)
          tma_load_4d(buf(b) + static_cast<unsigned>(c * kPlaneBytes), &map, 8 * c, -1, row0 - 1, img,
                      full(b));
      }
      if constexpr (kApplies) {
        mbar_wait(full(b), (k >> 1) & 1);
        apply_window<T>(fz, coef, reinterpret_cast<char*>(smem) + kWeightBytes + b * kBufBytes, p, half, img,
                        row0, h, kParts != 1);
        fence_proxy_async();
        named_sync(8, 128);
        if (p == 0) mbar_arrive(ready(b));
      }
    }
    return;
  }
  // ---- MMA warpgroup g: local tiles g, g + 2, ...
  const int wq = warp & 3, gid = lane >> 2, tq = lane & 3, t128 = threadIdx.x & 127;
  mbar_wait(wbar, 0);
  // A: weights chunk kc (8 k x 64 outputs, 1024 bytes): LBO 1024 (along k), SBO 128 (8 outputs)
  const uint64_t a_lo = static_cast<uint64_t>((wbase >> 4) & 0x3FFF) |
                        (static_cast<uint64_t>(1024 >> 4) << 16) | (static_cast<uint64_t>(128 >> 4) << 32);
  T* st = stage_base + g * (kStageBytes / 2);
  float acc[36];
  double dsum[2] = {0.0, 0.0}, dsq[2] = {0.0, 0.0};  // kFused: channels 16 wq + gid (+ 8) as stored
  // tiles of warpgroup 0 and 1: n0 >= n1; warpgroup 0's i-th turn follows warpgroup 1's (i - 1)-th, which
  // follows warpgroup 0's i-th
  const int n0 = (my_tiles + 1) / 2, n1 = my_tiles / 2;
  if (kTurns && g == 1 && n0 > 0) named_arrive(4, 256);
  for (int k = g; k < my_tiles; k += 2) {
    const int t = ts.tile(k), i = k >> 1;
    const int img = ts.image(t), row0 = ts.row0(t);
    constexpr bool kReady = kFused && kProducer && (kParts & 1);
    mbar_wait(kReady ? ready(g) : full(g), (k >> 1) & 1);
    if constexpr (kFused && (kParts & 1) && !kProducer) {  // the batchnorm applied to the window in place
      apply_window<T>(fz, coef, reinterpret_cast<char*>(smem) + kWeightBytes + g * kBufBytes, t128, half, img,
                      row0, h, kParts != 1);
      fence_proxy_async();
      named_sync(5 + g, 128);
    }
    if (kTurns) named_sync(g == 0 ? 4 : 3, 256);
    tile_mmas<T>(acc, a_lo, buf(g));
    if (kTurns) {
      if (g == 0 && i < n1) named_arrive(3, 256);
      if (g == 1 && i + 1 < n0) named_arrive(4, 256);
    }
    wg_wait<0>();
    fence_regs(acc);
    mbar_arrive(empty(g));
    float ssum[2] = {0.0f, 0.0f}, ssq[2] = {0.0f, 0.0f};
    stage_and_store(acc, st, y + ((static_cast<int64_t>(img) * h + row0) * kW) * kC + kHalf * half, g, wq,
                    gid, tq, t128, [&](int mh, T v) {
                      if (kFused) {
                        const float f = static_cast<float>(v);
                        ssum[mh] += f, ssq[mh] += f * f;
                      }
                    });
    if (kFused)
#pragma unroll
      for (int mh = 0; mh < 2; ++mh) dsum[mh] += ssum[mh], dsq[mh] += ssq[mh];
  }
  if constexpr (kFused)  // both warpgroups' staging reads are done: the buffers hold the sums now
    block_sums(dsum, dsq, reinterpret_cast<double*>(stage_base), fz.part, g, wq, gid, tq, t128);
}

// x [n, h, 16, 128] read in windows: boxes of 8 channels x 18 columns x 6 rows x 1 image at (8 c, -1, row0 -
// 1, image); what lies outside the map arrives as zeros.
CUtensorMap window_map(const void* x, bool f16, int n, int h) {
  return fresco::bench::conv128::window_map(x, f16, n, h, kWinCols, kWinRows);
}

// w [128 outputs, 1152 k] read in chunks: boxes of 8 k x 64 outputs (1024 bytes, outputs along the rows).
CUtensorMap weight_map(const void* w, bool f16) {
  const cuuint64_t strides[1] = {kKDim * 2};
  return tiled_map<2>(w, f16, {kKDim, kC}, strides, {8, kHalf});
}

template <class T>
int run(int batch, int reps, const char* dtype_name, cudnnDataType_t cudnn_type) {
  const int h = 16;
  const int64_t nx = static_cast<int64_t>(batch) * h * kW * kC, nw = static_cast<int64_t>(kC) * kKDim;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const std::vector<T> hx = fresco::bench::random_values<T>(nx, 1.0f, rng),
                       hw = fresco::bench::random_values<T>(nw, 0.04f, rng);
  T *x, *w, *y, *y2;
  float* yref;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = std::max(2, sms / 2 * 2);
  CK(cudaMalloc(&x, nx * sizeof(T)));
  CK(cudaMalloc(&w, nw * sizeof(T)));
  CK(cudaMalloc(&y, nx * sizeof(T)));
  CK(cudaMalloc(&y2, nx * sizeof(T)));
  CK(cudaMalloc(&yref, nx * sizeof(float)));
  CK(cudaMemcpy(x, hx.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
  const CUtensorMap map = window_map(x, cudnn_type == CUDNN_DATA_HALF, batch, h);
  // launches kernel K with its shared memory (bufs window buffers)
  auto launcher = [&](auto kernel, int bufs) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            static_cast<int>(smem_bytes(bufs))));
    return [=] { kernel<<<blocks, kThreads, smem_bytes(bufs)>>>(w, y, batch, h, map); };
  };
  auto own = launcher(conv128_kernel<T, false>, 4);
  auto own_alt = launcher(conv128_kernel<T, true>, 4);
  auto alt6 = launcher(conv128_kernel<T, true, 6>, 6);
  auto no_store = launcher(conv128_kernel<T, true, 4, 1>, 4);
  auto mma_only = launcher(conv128_kernel<T, true, 4, 2>, 4);
  auto mma_aligned = launcher(conv128_kernel<T, true, 4, 3>, 4);
  auto staged = launcher(conv128_kernel<T, true, 4, 0, true>, 4);
  const CUtensorMap wmap = weight_map(w, cudnn_type == CUDNN_DATA_HALF);
  // launches conv128_ss_kernel form K with its shared memory and the batchnorm f (Fused{}: none)
  auto ss_launcher = [&](auto kernel, const Fused& f) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSsSmem)));
    return [=] { kernel<<<blocks, kSsThreads, kSsSmem>>>(y, batch, h, map, wmap, f); };
  };
  auto ss = ss_launcher(conv128_ss_kernel<T>, Fused{});
  auto ss_turns = ss_launcher(conv128_ss_kernel<T, true>, Fused{});
  // the fused form: a batchnorm (scale, shift per channel) applied to x, y's sums for the next one
  std::vector<float> hcoef(2 * kC);
  for (int c = 0; c < kC; ++c) {
    const float gamma = 1.0f + 0.5f * d(rng), beta = 0.5f * d(rng), mean = 0.2f * d(rng),
                invstd = 1.0f + 0.2f * d(rng);
    hcoef[c] = gamma * invstd, hcoef[kC + c] = beta - mean * hcoef[c];
  }
  float* dcoef = nullptr;
  T* applied = nullptr;
  double* part = nullptr;
  CK(cudaMalloc(&dcoef, 2 * kC * sizeof(float)));
  CK(cudaMalloc(&applied, nx * sizeof(T)));
  CK(cudaMalloc(&part, static_cast<size_t>(blocks) * kHalf * 2 * sizeof(double)));
  CK(cudaMemcpy(dcoef, hcoef.data(), 2 * kC * sizeof(float), cudaMemcpyHostToDevice));
  const Fused fz{dcoef, dcoef + kC, applied, part};
  auto fused = ss_launcher(conv128_ss_kernel<T, true, true>, fz);
  auto fused_unstored = ss_launcher(conv128_ss_kernel<T, true, true, 1>, fz);
  auto sums_only = ss_launcher(conv128_ss_kernel<T, true, true, 2>, fz);
  auto fused_producer = ss_launcher(conv128_ss_kernel<T, true, true, 3, true>, fz);
  auto producer_unstored = ss_launcher(conv128_ss_kernel<T, true, true, 1, true>, fz);
  reference_kernel<T><<<4096, 256>>>(x, w, yref, batch, h);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> href(nx);
  CK(cudaMemcpy(href.data(), yref, nx * sizeof(float), cudaMemcpyDeviceToHost));
  auto worst_of = [&](const T* dev) {
    std::vector<T> hy(nx);
    CK(cudaMemcpy(hy.data(), dev, nx * sizeof(T), cudaMemcpyDeviceToHost));
    double worst = 0.0;
    for (int64_t i = 0; i < nx; ++i) {
      const double got = static_cast<float>(hy[i]), want = href[i];
      const double e = std::fabs(got - want) / (0.05 + std::fabs(want));
      worst = std::isnan(got) ? 1e30 : std::max(worst, e);
    }
    return worst;
  };
  // y set to NaN everywhere (a position the kernel misses shows), the kernel run, its largest error
  auto checked = [&](auto fn) {
    CK(cudaMemset(y, 0xff, nx * sizeof(T)));
    fn();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return worst_of(y);
  };
  const double own_err = checked(own), alt_err = checked(own_alt), alt6_err = checked(alt6),
               staged_err = checked(staged), ss_err = checked(ss), turns_err = checked(ss_turns);
  const fresco::bench::BestTimer timer;
  auto time_us = [&](auto fn) { return timer.us(fn, reps); };
  const float own_us = time_us(own), alt_us = time_us(own_alt), alt6_us = time_us(alt6);
  const float no_store_us = time_us(no_store), mma_only_us = time_us(mma_only),
              mma_aligned_us = time_us(mma_aligned), staged_us = time_us(staged), ss_us = time_us(ss),
              turns_us = time_us(ss_turns);
  const fresco::bench::CudnnConv3x3 dnn(cudnn_type, batch, kC, kC, h, kW);
  auto dnn_fwd = [&] { dnn.forward(x, w, y2); };
  dnn_fwd();
  CK(cudaDeviceSynchronize());
  const double dnn_err = worst_of(y2);
  const float dnn_us = time_us(dnn_fwd);
  const double flop = 2.0 * batch * h * kW * kC * kKDim;
  std::printf(
      "{\"bench\":\"conv128_probe\",\"dtype\":\"%s\",\"batch\":%d,\"own_us\":%.2f,\"own_tflops\":%.1f,"
      "\"own_y_max_rel_err\":%.3g,\"alternate_us\":%.2f,\"alternate_tflops\":%.1f,"
      "\"alternate_y_max_rel_err\":%.3g,\"cudnn_us\":%.2f,\"cudnn_tflops\":%.1f,\"cudnn_y_max_rel_err\":%.3g,"
      "\"cudnn_algo\":%d,\"blocks\":%d}\n",
      dtype_name, batch, own_us, flop / own_us * 1e-6, own_err, alt_us, flop / alt_us * 1e-6, alt_err, dnn_us,
      flop / dnn_us * 1e-6, dnn_err, static_cast<int>(dnn.perf[0].algo), blocks);
  std::printf(
      "{\"bench\":\"conv128_probe_parts\",\"dtype\":\"%s\",\"alternate_6_buffers_us\":%.2f,"
      "\"alternate_6_buffers_y_max_rel_err\":%.3g,\"without_stores_us\":%.2f,\"mma_only_us\":%.2f,"
      "\"mma_only_tflops\":%.1f,\"mma_only_aligned_b_us\":%.2f,\"staged_us\":%.2f,\"staged_tflops\":%.1f,"
      "\"staged_y_max_rel_err\":%.3g,\"weights_in_smem_us\":%.2f,\"weights_in_smem_tflops\":%.1f,"
      "\"weights_in_smem_y_max_rel_err\":%.3g,\"weights_in_smem_turns_us\":%.2f,"
      "\"weights_in_smem_turns_y_max_rel_err\":%.3g}\n",
      dtype_name, alt6_us, alt6_err, no_store_us, mma_only_us, flop / mma_only_us * 1e-6, mma_aligned_us,
      staged_us, flop / staged_us * 1e-6, staged_err, ss_us, flop / ss_us * 1e-6, ss_err, turns_us,
      turns_err);
  // the fused form against the reference on the applied map (computed here as the kernel computes it)
  std::vector<T> ha(nx);
  for (int64_t i = 0; i < nx; ++i) {
    const int c = static_cast<int>(i % kC);
    const float f = std::fmaf(static_cast<float>(hx[i]), hcoef[c], hcoef[kC + c]);
    ha[i] = fresco::bench::from_float<T>(f > 0.0f ? f : 0.0f);
  }
  T* xa = nullptr;
  CK(cudaMalloc(&xa, nx * sizeof(T)));
  CK(cudaMemcpy(xa, ha.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
  reference_kernel<T><<<4096, 256>>>(xa, w, yref, batch, h);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(href.data(), yref, nx * sizeof(float), cudaMemcpyDeviceToHost));
  // a fused kernel's y error, applied map mismatches and sums error
  struct FusedCheck {
    double y_err;
    int64_t applied_mismatches;
    double sums_err;
    bool ok() const { return y_err < 0.02 && applied_mismatches == 0 && sums_err < 1e-4; }
  };
  auto check_fused = [&](auto fn) {
    CK(cudaMemset(applied, 0xff, nx * sizeof(T)));
    FusedCheck r{checked(fn), 0, 0.0};
    std::vector<T> hy(nx), happ(nx);
    std::vector<double> hpart(static_cast<size_t>(blocks) * kHalf * 2);
    CK(cudaMemcpy(hy.data(), y, nx * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(happ.data(), applied, nx * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hpart.data(), part, hpart.size() * sizeof(double), cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < nx; ++i) r.applied_mismatches += std::memcmp(&happ[i], &ha[i], sizeof(T)) != 0;
    std::vector<double> want(2 * kC, 0.0), have(2 * kC, 0.0);
    for (int64_t i = 0; i < nx; ++i) {
      const double v = static_cast<float>(hy[i]);
      want[i % kC] += v, want[kC + i % kC] += v * v;
    }
    for (int b = 0; b < blocks; ++b)
      for (int c = 0; c < kHalf; ++c) {
        const int ch = kHalf * (b & 1) + c;
        have[ch] += hpart[(static_cast<size_t>(b) * kHalf + c) * 2];
        have[kC + ch] += hpart[(static_cast<size_t>(b) * kHalf + c) * 2 + 1];
      }
    for (int c = 0; c < 2 * kC; ++c)
      r.sums_err = std::max(r.sums_err, std::fabs(have[c] - want[c]) / (1.0 + std::fabs(want[c])));
    return r;
  };
  const FusedCheck fc = check_fused(fused), pc = check_fused(fused_producer);
  const float fused_us = time_us(fused), unstored_us = time_us(fused_unstored), sums_us = time_us(sums_only),
              producer_us = time_us(fused_producer), producer_unstored_us = time_us(producer_unstored);
  std::printf(
      "{\"bench\":\"conv128_probe_fused\",\"dtype\":\"%s\",\"fused_us\":%.2f,\"fused_y_max_rel_err\":%.3g,"
      "\"fused_applied_mismatches\":%lld,\"fused_sums_max_rel_err\":%.3g,\"convolution_alone_us\":%.2f,"
      "\"prologue_unstored_and_sums_us\":%.2f,\"sums_only_us\":%.2f,\"producer_prologue_us\":%.2f,"
      "\"producer_y_max_rel_err\":%.3g,\"producer_applied_mismatches\":%lld,"
      "\"producer_sums_max_rel_err\":%.3g,\"producer_prologue_unstored_and_sums_us\":%.2f}\n",
      dtype_name, fused_us, fc.y_err, static_cast<long long>(fc.applied_mismatches), fc.sums_err, turns_us,
      unstored_us, sums_us, producer_us, pc.y_err, static_cast<long long>(pc.applied_mismatches), pc.sums_err,
      producer_unstored_us);
  return own_err < 0.02 && alt_err < 0.02 && alt6_err < 0.02 && staged_err < 0.02 && ss_err < 0.02 &&
                 turns_err < 0.02 && fc.ok() && pc.ok()
             ? 0
             : 2;
}

}  // namespace

int main(int argc, char** argv) {
  return fresco::bench::probe_main(
      argc, argv, "bench_conv128_probe",
      [](auto tag, int batch, int reps, const char* dtype, cudnnDataType_t type) {
        return run<decltype(tag)>(batch, reps, dtype, type);
      });
}
