// Probe: how fast can fresco's own tensor-core kernel run ResNet-18's stage-1 convolution (3x3, stride 1,
// pad 1, 64 -> 64 channels, 32x32 maps, NHWC fp16 / bf16) with batchnorm's per-channel sums of its output in
// the same kernel, against cuDNN on the same card? A diagnostic for the own-kernel route of
// docs/performance.md (cuDNN runs this shape at about 440 TFLOP/s, its weakest in the step), not part of the
// product (it links the product's kernel, cuDNN and the CUDA runtime).
//
// Persistent blocks (one per SM). Variants 1-3 (session 14) use 8 warps and tiles of 8 output rows (256
// positions) x 64 output channels whose zero-padded input window (10 x 34 positions x 64 channels) comes
// by cp.async into shared memory (double-buffered):
//   mma:         all 64 x 576 weights in shared memory, the window's 16-byte chunks XOR-swizzled so
//                ldmatrix is conflict-free; each warp computes 64 positions x 32 channels (mma.sync).
//   wgmma:       the same operands on Hopper's warpgroup MMA (sm_90a): A (positions) from registers through
//                ldmatrix, the weights as B read from shared memory by the tensor cores.
//   wgmma_regw:  the weights as A, held in registers for the whole kernel; the window as B through
//                descriptors; one m64n32k16 per output row and k-step.
// Session 15's pipelined and warp-specialized variants (4-6) led to the product's kernel
// (ops/conv3x3_wgmma.h: warp-specialized, windows by TMA), which this probe now times in their place; their
// code is in git history (71dec1e), their times in bench/results/2026-12-04_h200_session15.json.
// Each is checked against a direct fp32-accumulating kernel (max relative error of y, of the sums); the
// product kernel is timed with both issue schedules, and its gradients against cuDNN's (timing only: the
// kernel test checks their values). Measured on the H200 (bench/results/2026-12-04_h200_session16.json),
// kernels alone: forward with sums 68.0 / 67.1 us fp16 / bf16 against cuDNN's 90.1 / 89.5 without sums, input
// gradient 70.3 / 69.9 against 106.6 / 106.3, weight gradient 88.9 / 90.3 against 93.1 / 91.0; variants 1-3
// 148 / 135 / 115 us.
//
// Usage: bench_conv3x3_probe [--batch 512] [--dtype fp16|bf16] [--reps 20]
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

#include "ops/conv3x3_wgmma.h"
#include "ops/mma_sync.cuh"
#include "ops/wgmma.cuh"
#include "probe_common.h"

namespace {

using fresco::bench::check;

constexpr int kC = 64, kK = 64, kW = 32, kRowsPerTile = 8, kHaloRows = kRowsPerTile + 2, kHaloCols = kW + 2;
constexpr int kTaps = 9, kKDim = kTaps * kC;            // 576
constexpr int kHaloChunks = kHaloRows * kHaloCols * 8;  // 16-byte chunks (8 per position)
constexpr int kWeightChunks = kK * kKDim / 8;           // 4608
constexpr int kThreads = 256;
constexpr size_t kSmem = (2 * kHaloChunks + kWeightChunks) * 16;  // 2 x 43.5 KB + 72 KB

using fresco::cuda::fence_regs;
using fresco::cuda::ldmatrix_x4;
using fresco::cuda::mma;
using fresco::cuda::round2;
using fresco::cuda::smem_desc;
using fresco::cuda::wg_commit;
using fresco::cuda::wg_fence;
using fresco::cuda::wg_wait;
using fresco::cuda::wgmma32;
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return fresco::cuda::shared_address(p);
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
template <class T>
__device__ __forceinline__ float tof(T v) {
  return static_cast<float>(v);
}
// Halo position (row 0..9, col 0..33), logical chunk 0..7 -> physical 16-byte chunk index.
__device__ __forceinline__ int halo_chunk(int pos, int c) {
  return pos * 8 + (c ^ (pos & 7));
}
// Weight row n (output channel), logical chunk c (0..71) -> physical chunk index.
__device__ __forceinline__ int weight_chunk(int n, int c) {
  return n * 72 + ((c & ~7) | ((c ^ n) & 7));
}

// The zero-padded input window of output rows row0 .. row0 + 7 of image img, 16 bytes at a time by cp.async,
// chunk c (channels 8c .. 8c + 7) of window position pos to dst + at(pos, c).
template <class T, class At>
__device__ void load_window(uint4* dst, const T* x, int img, int row0, int h, At at) {
  for (int i = threadIdx.x; i < kHaloChunks; i += kThreads) {
    const int pos = i / 8, c = i % 8, hr = pos / kHaloCols, hc = pos % kHaloCols;
    const int yr = row0 + hr - 1, xc = hc - 1;
    const bool valid = yr >= 0 && yr < h && xc >= 0 && xc < kW;
    const T* src =
        x + ((static_cast<int64_t>(img) * h + (valid ? yr : 0)) * kW + (valid ? xc : 0)) * kC + c * 8;
    cp_async16(dst + at(pos, c), src, valid);
  }
}
// The position-major, swizzled layout the ldmatrix kernels read (halo_chunk).
template <class T>
__device__ void load_halo(uint4* halo, const T* x, int img, int row0, int h) {
  load_window(halo, x, img, row0, h, [](int pos, int c) { return halo_chunk(pos, c); });
}

// One 16 x 8 accumulator fragment (c0, c1: position col, channels ch, ch + 1; c2, c3: position col + 8)
// rounded to T and stored in output row yr; the rounded values and their squares added to the thread's sums
// of channels ch, ch + 1.
template <class T>
__device__ __forceinline__ void store_fragment(T* yr, int col, int ch, float c0, float c1, float c2, float c3,
                                               float (&sum)[2], float (&sq)[2]) {
  float f0, f1, f2, f3;
  const uint32_t lo = round2(c0, c1, f0, f1, T{}), hi = round2(c2, c3, f2, f3, T{});
  *reinterpret_cast<uint32_t*>(yr + col * kK + ch) = lo;
  *reinterpret_cast<uint32_t*>(yr + (col + 8) * kK + ch) = hi;
  sum[0] += f0 + f2, sum[1] += f1 + f3;
  sq[0] += f0 * f0 + f2 * f2, sq[1] += f1 * f1 + f3 * f3;
}

// The block's partials part[block][channel][2]: the slots' sums red[slot][channel][2] added in slot order by
// the threads ch = 0 .. 63 of the group that calls it (ch: the thread's index in that group).
__device__ __forceinline__ void add_slots(const float* red, int slots, float* part, int ch) {
  if (ch < kK) {
    float a = 0.0f, b = 0.0f;
    for (int m = 0; m < slots; ++m) a += red[(m * kK + ch) * 2], b += red[(m * kK + ch) * 2 + 1];
    part[(blockIdx.x * kK + ch) * 2] = a, part[(blockIdx.x * kK + ch) * 2 + 1] = b;
  }
}

// The block's per-channel partials (part[block][channel][2]) from each thread's sums of J channel pairs
// (channels channel_of(j) + 0, 1): added over the lanes of a warp that hold the same channels, then over the
// `slots` warps that share channels (this warp is `slot`) in order, through `red` (slots x 64 x 2 floats of
// shared memory no longer in use).
template <int J, class ChannelOf>
__device__ void write_block_partials(const float (&ssum)[J][2], const float (&ssq)[J][2], int slot, int slots,
                                     ChannelOf channel_of, float* red, float* part) {
  const int gid = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float a = ssum[j][e], b = ssq[j][e];
      fresco::cuda::add_over_lanes<4, 32>(a, b);
      if (gid == 0) {
        const int ch = channel_of(j) + e;
        red[(slot * kK + ch) * 2] = a, red[(slot * kK + ch) * 2 + 1] = b;
      }
    }
  __syncthreads();
  add_slots(red, slots, part, threadIdx.x);
}

// The persistent tile loop of variants 1-3: tiles t = blockIdx.x, + gridDim.x, ... of 8 output rows. Tile
// t's window is loaded by load(buffer, img, row0) while tile t - gridDim.x computes (two buffers; copies the
// caller issued before, such as the weights, land with the first); body(buffer, img, row0) runs once every
// thread's copies are visible, also to the tensor cores, and the buffer is refilled only after all threads
// finished the body.
template <class Load, class Body>
__device__ __forceinline__ void for_each_tile(int n, int h, Load load, Body body) {
  const int tiles_per_img = h / kRowsPerTile, tiles = n * tiles_per_img;
  int t = blockIdx.x;
  if (t < tiles) load(0, t / tiles_per_img, (t % tiles_per_img) * kRowsPerTile);
  cp_async_commit();
  for (int it = 0; t < tiles; t += gridDim.x, ++it) {
    const int next = t + gridDim.x;
    if (next < tiles) load((it + 1) & 1, next / tiles_per_img, (next % tiles_per_img) * kRowsPerTile);
    cp_async_commit();
    cp_async_wait<1>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    body(it & 1, t / tiles_per_img, (t % tiles_per_img) * kRowsPerTile);
    __syncthreads();
  }
  cp_async_wait<0>();
  __syncthreads();
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                   float* __restrict__ part, int n, int h) {
  extern __shared__ __align__(128) uint4 smem[];
  uint4* halo[2] = {smem, smem + kHaloChunks};
  uint4* wsm = smem + 2 * kHaloChunks;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const int wm = warp & 3, wn = warp >> 2;  // positions 64 wm .. (output rows 2wm, 2wm+1), channels 32 wn ..
  // weights [K][3][3][C] = [n][k] with k = tap * 64 + c: 72 chunks per output channel
  for (int i = threadIdx.x; i < kWeightChunks; i += kThreads)
    cp_async16(wsm + weight_chunk(i / 72, i % 72), w + static_cast<int64_t>(i) * 8, true);
  float ssum[4][2], ssq[4][2];
#pragma unroll
  for (int j = 0; j < 4; ++j) ssum[j][0] = ssum[j][1] = ssq[j][0] = ssq[j][1] = 0.0f;
  auto load = [&](int b, int img, int row0) { load_halo(halo[b], x, img, row0, h); };
  for_each_tile(n, h, load, [&](int b, int img, int row0) {
    const uint4* hb = halo[b];
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
    // this lane's ldmatrix rows: A (position within the m16 tile, k half), B (channel, k half)
    const int arow = lane & 15, akh = lane >> 4;
    const int bn = 32 * wn + ((lane >> 4) << 3) + (lane & 7), bkh = (lane >> 3) & 1;
#pragma unroll
    for (int tap = 0; tap < kTaps; ++tap) {
      const int r = tap / 3, s = tap % 3;
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {  // 16-channel steps
        uint32_t a[4][4], b[2][4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // m16 tile i: output row 2wm + i / 2, columns 16 (i % 2) ..
          const int pos = (2 * wm + i / 2 + r) * kHaloCols + 16 * (i % 2) + arow + s;
          ldmatrix_x4(a[i], smem_addr(hb + halo_chunk(pos, 2 * cc + akh)));
        }
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)  // n8 tiles 2jj, 2jj + 1
          ldmatrix_x4(b[jj], smem_addr(wsm + weight_chunk(bn + 16 * jj, tap * 8 + 2 * cc + bkh)));
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            mma(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1], T{});
      }
    }
    // epilogue: y rounded once, the channel sums of exactly those values
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      T* yr = y + ((static_cast<int64_t>(img) * h + row0 + 2 * wm + i / 2) * kW) * kK;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        store_fragment(yr, 16 * (i % 2) + gid, 32 * wn + 8 * j + 2 * tq, acc[i][j][0], acc[i][j][1],
                       acc[i][j][2], acc[i][j][3], ssum[j], ssq[j]);
    }
  });
  write_block_partials(
      ssum, ssq, wm, 4, [&](int j) { return 32 * wn + 8 * j + 2 * tq; }, reinterpret_cast<float*>(smem),
      part);
}

// ---- the same tile on Hopper's warpgroup MMA (wgmma, sm_90a): two warpgroups, each 128 positions (two m64
// blocks) x 64 channels; A (positions x 16 channels) from registers through the same ldmatrix, B (the
// weights) read by the tensor cores from shared memory in the no-swizzle core-matrix layout: [72 k-chunks][64
// channels][8 k] (a core matrix = 8 channels x 8 k = 128 bytes; k-halves 1024 bytes apart, channel groups
// 128).
#define FR_WGMMA_REGS                                                                                       \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
FR_WGMMA(wgmma64, 32, "m64n64k16", FR_WGMMA_REGS, "%37", FR_WGMMA_D32)

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_wgmma_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                         float* __restrict__ part, int n, int h) {
  extern __shared__ __align__(128) uint4 smem[];
  uint4* halo[2] = {smem, smem + kHaloChunks};
  uint4* wsm = smem + 2 * kHaloChunks;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const int g = warp >> 2, wq = warp & 3;  // warpgroup (output rows 4g .. 4g + 3), warp in it
  for (int i = threadIdx.x; i < kWeightChunks; i += kThreads)
    cp_async16(wsm + (i % 72) * 64 + i / 72, w + static_cast<int64_t>(i) * 8, true);
  float ssum[8][2], ssq[8][2];
#pragma unroll
  for (int j = 0; j < 8; ++j) ssum[j][0] = ssum[j][1] = ssq[j][0] = ssq[j][1] = 0.0f;
  const unsigned wbase = smem_addr(wsm);
  const int arow = lane & 15, akh = lane >> 4;
  auto load = [&](int b, int img, int row0) { load_halo(halo[b], x, img, row0, h); };
  for_each_tile(n, h, load, [&](int b, int img, int row0) {
    const uint4* hb = halo[b];
    float acc[2][32];
    uint32_t a[2][2][4];  // [buffer][m64 block]
    auto load_a = [&](int ks, uint32_t(&dst)[2][4]) {
      const int tap = ks / 4, cc = ks % 4, r = tap / 3, s = tap % 3;
#pragma unroll
      for (int mb = 0; mb < 2; ++mb) {
        const int pos = (4 * g + 2 * mb + wq / 2 + r) * kHaloCols + 16 * (wq % 2) + arow + s;
        ldmatrix_x4(dst[mb], smem_addr(hb + halo_chunk(pos, 2 * cc + akh)));
      }
    };
    load_a(0, a[0]);
#pragma unroll
    for (int ks = 0; ks < 36; ++ks) {
      wg_fence();
      const uint64_t desc =
          smem_desc(wbase + static_cast<unsigned>((ks / 4) * 8 + 2 * (ks % 4)) * 1024u, 1024, 128);
#pragma unroll
      for (int mb = 0; mb < 2; ++mb) wgmma64(acc[mb], a[ks & 1][mb], desc, ks > 0, T{});
      wg_commit();
      wg_wait<1>();  // the previous step's wgmmas are done: their A registers may be reloaded
      if (ks + 1 < 36) load_a(ks + 1, a[(ks + 1) & 1]);
    }
    wg_wait<0>();
    fence_regs(acc[0]);
    fence_regs(acc[1]);
#pragma unroll
    for (int mb = 0; mb < 2; ++mb) {
      T* yr = y + ((static_cast<int64_t>(img) * h + row0 + 4 * g + 2 * mb + wq / 2) * kW) * kK;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        store_fragment(yr, 16 * (wq % 2) + gid, 8 * j + 2 * tq, acc[mb][4 * j], acc[mb][4 * j + 1],
                       acc[mb][4 * j + 2], acc[mb][4 * j + 3], ssum[j], ssq[j]);
    }
  });
  write_block_partials(
      ssum, ssq, warp, 8, [&](int j) { return 8 * j + 2 * tq; }, reinterpret_cast<float*>(smem), part);
}

// ---- Variant 3: the weights as wgmma's A operand, held in registers for the whole kernel (64 output
// channels x 576 k: 144 registers per thread), the input window as B through descriptors, one m64n32k16 per
// output row (32 positions) and k-step. Per k16 step the tensor cores then read only 1 KB of B from shared
// memory per 65 KFLOP (the variant above also reads A: 4 KB per 131 KFLOP, near the SM's shared-memory
// bandwidth at full tensor rate). The window is stored chunk-major, [8 chunks of 8 channels][340
// positions][16 bytes], so a tap's B tile (32 positions x 16 channels) is four 128-byte core matrices per
// k-half at any position offset: SBO 128 bytes (8 positions), LBO 5440 bytes (the next chunk). The
// accumulators hold channels x positions; the epilogue stages each warpgroup's 4 rows in shared memory and
// writes them as 16-byte vectors.
constexpr int kPositions = kHaloRows * kHaloCols;  // 340
// Passes over a warpgroup's 4 output rows (4 / kPasses accumulators of 16 registers beside the 144 of the
// weights; ptxas spills 64 bytes with 1, 2 or 4 passes).
constexpr int kPasses = 2;
constexpr size_t kSmemV3 = (2 * kHaloChunks) * 16 + 2 * 4 * kW * kK * 2;  // 2 windows + 2 x 4 staged rows

template <class T>
__device__ void load_window_chunk_major(uint4* win, const T* x, int img, int row0, int h) {
  load_window(win, x, img, row0, h, [](int pos, int c) { return c * kPositions + pos; });
}

template <class T>
__device__ __forceinline__ float rounded(float v, T* out) {
  const T r = static_cast<T>(v);
  *out = r;
  return static_cast<float>(r);
}

// This thread's A fragments of the weights [64][576] for every k-step: output channels c0 and c0 + 8 (mma's
// fragment rows gid, gid + 8), k = 16 ks + 2 tq (+1, +8, +9).
template <class T>
__device__ __forceinline__ void load_weight_fragments(const T* w, int c0, int tq, uint32_t (&a)[36][4]) {
  const uint32_t* w32 = reinterpret_cast<const uint32_t*>(w);
#pragma unroll
  for (int ks = 0; ks < 36; ++ks) {
    const int k = ks * 16 + 2 * tq;
    a[ks][0] = w32[(c0 * kKDim + k) / 2], a[ks][1] = w32[((c0 + 8) * kKDim + k) / 2];
    a[ks][2] = w32[(c0 * kKDim + k + 8) / 2], a[ks][3] = w32[((c0 + 8) * kKDim + k + 8) / 2];
  }
}

// The block's per-channel partials from the sums of two warpgroups whose threads hold channels c0 and
// c0 + 8 (added over the four lanes of a gid, then over the warpgroups in order through red: 2 x 64 x 2
// floats of shared memory no longer in use).
__device__ __forceinline__ void write_warpgroup_partials(const float (&ssum)[2], const float (&ssq)[2], int g,
                                                         int c0, int tq, float* red, float* part) {
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    float sa = ssum[e], sb = ssq[e];
    fresco::cuda::add_over_lanes<1, 4>(sa, sb);
    if (tq == 0) red[(g * kK + c0 + 8 * e) * 2] = sa, red[(g * kK + c0 + 8 * e) * 2 + 1] = sb;
  }
  __syncthreads();
  add_slots(red, 2, part, threadIdx.x);
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_wgmma_regw_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                              float* __restrict__ part, int n, int h) {
  extern __shared__ __align__(128) uint4 smem[];
  uint4* win[2] = {smem, smem + kHaloChunks};
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const int g = warp >> 2, wq = warp & 3;  // warpgroup (output rows 4g .. 4g + 3), warp in it (16 channels)
  T* stage = reinterpret_cast<T*>(smem + 2 * kHaloChunks) + g * 4 * kW * kK;  // [4 rows][32 positions][64]
  // A: this warp's 16 output channels (rows gid, gid + 8) at every k-step, in mma's fragment layout
  uint32_t a[36][4];
  const int c0 = 16 * wq + gid;
  load_weight_fragments(w, c0, tq, a);
  float ssum[2] = {0.0f, 0.0f}, ssq[2] = {0.0f, 0.0f};  // channels c0, c0 + 8
  auto load = [&](int b, int img, int row0) { load_window_chunk_major(win[b], x, img, row0, h); };
  for_each_tile(n, h, load, [&](int b, int img, int row0) {
    const unsigned wb = smem_addr(win[b]);
#pragma unroll 1
    for (int half = 0; half < kPasses; ++half) {  // 4 / kPasses output rows at a time
      float acc[4 / kPasses][16];
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 36; ++ks) {
        const int tap = ks / 4, cc = ks % 4, r = tap / 3, s = tap % 3;
#pragma unroll
        for (int i = 0; i < 4 / kPasses; ++i) {
          const int row = 4 * g + (4 / kPasses) * half + i;  // in the tile
          unsigned base = wb + static_cast<unsigned>(row * kHaloCols * 16);
          asm volatile(""
                       : "+r"(base));  // computed here: hoisted, the 36 k-steps' addresses spilled registers
          const unsigned addr =
              base + static_cast<unsigned>(((2 * cc) * kPositions + r * kHaloCols + s) * 16);
          wgmma32(acc[i], a[ks], smem_desc(addr, kPositions * 16, 128), ks > 0, T{});
        }
      }
      wg_commit();
      wg_wait<0>();
#pragma unroll
      for (int i = 0; i < 4 / kPasses; ++i) fence_regs(acc[i]);
        // stage: acc[i][4j + e] = channel c0 (e < 2) or c0 + 8, position 8j + 2tq + (e & 1)
#pragma unroll
      for (int i = 0; i < 4 / kPasses; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int pos = 8 * j + 2 * tq + (e & 1), ch = c0 + (e >> 1) * 8;
            const float f =
                rounded(acc[i][4 * j + e], stage + (((4 / kPasses) * half + i) * kW + pos) * kK + ch);
            ssum[e >> 1] += f, ssq[e >> 1] += f * f;
          }
    }
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g));  // this warpgroup's staged rows are complete
    uint4* dst = reinterpret_cast<uint4*>(y + ((static_cast<int64_t>(img) * h + row0 + 4 * g) * kW) * kK);
    const uint4* src = reinterpret_cast<const uint4*>(stage);
    for (int v = threadIdx.x & 127; v < 4 * kW * kK / 8; v += 128) dst[v] = src[v];  // 4 rows, contiguous
  });
  write_warpgroup_partials(ssum, ssq, g, c0, tq, reinterpret_cast<float*>(smem), part);
}

// The blocks' partials part[block][channel][2] (float from variants 1-3, double from fresco's kernel) added
// in block order.
template <class P>
__global__ void finalize_kernel(const P* part, int blocks, double* sums) {
  const int c = threadIdx.x;
  if (c >= kK) return;
  double a = 0.0, b = 0.0;
  for (int i = 0; i < blocks; ++i) a += part[(i * kK + c) * 2], b += part[(i * kK + c) * 2 + 1];
  sums[c] = a, sums[kK + c] = b;
}

// Direct reference: one thread per output, fp32 accumulation of the same T inputs.
template <class T>
__global__ void reference_kernel(const T* x, const T* w, float* y, int n, int h) {
  const int64_t total = static_cast<int64_t>(n) * h * kW * kK;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(o % kK);
    const int64_t p = o / kK;
    const int q = static_cast<int>(p % kW), pr = static_cast<int>((p / kW) % h),
              img = static_cast<int>(p / (kW * h));
    float acc = 0.0f;
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s) {
        const int yr = pr + r - 1, xc = q + s - 1;
        if (yr < 0 || yr >= h || xc < 0 || xc >= kW) continue;
        const T* xp = x + ((static_cast<int64_t>(img) * h + yr) * kW + xc) * kC;
        const T* wp = w + ((k * 3 + r) * 3 + s) * kC;
        for (int c = 0; c < kC; ++c) acc += tof(xp[c]) * tof(wp[c]);
      }
    y[o] = acc;
  }
}

#ifdef FRESCO_PROBE_SM90A
constexpr bool kHasWgmmaHost = true;  // built for sm_90a (CMake: CUDA_ARCHITECTURES 90a)
#else
constexpr bool kHasWgmmaHost = false;
#endif

template <class T>
float to_float(T v) {
  return static_cast<float>(v);
}

template <class T>
int run(int batch, int reps, const char* dtype_name, cudnnDataType_t cudnn_type) {
  const int h = 32;
  const int64_t nx = static_cast<int64_t>(batch) * h * kW * kC, nw = static_cast<int64_t>(kK) * kKDim;
  std::mt19937 rng(7);
  const std::vector<T> hx = fresco::bench::random_values<T>(nx, 1.0f, rng),
                       hw = fresco::bench::random_values<T>(nw, 0.06f, rng);
  T *x, *w, *y, *y2;
  float *yref, *part;
  double* sums;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = sms;
  CK(cudaMalloc(&x, nx * sizeof(T)));
  CK(cudaMalloc(&w, nw * sizeof(T)));
  CK(cudaMalloc(&y, nx * sizeof(T)));
  CK(cudaMalloc(&y2, nx * sizeof(T)));
  CK(cudaMalloc(&yref, nx * sizeof(float)));
  CK(cudaMalloc(&part, blocks * kK * 2 * sizeof(float)));
  CK(cudaMalloc(&sums, 2 * kK * sizeof(double)));
  CK(cudaMemcpy(x, hx.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(conv3x3_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmem)));
  CK(cudaFuncSetAttribute(conv3x3_wgmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmem)));
  auto own = [&] {
    conv3x3_kernel<T><<<blocks, kThreads, kSmem>>>(x, w, y, part, batch, h);
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
  };
  CK(cudaFuncSetAttribute(conv3x3_wgmma_regw_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmemV3)));
  auto own_v3 = [&] {
    conv3x3_wgmma_regw_kernel<T><<<blocks, kThreads, kSmemV3>>>(x, w, y, part, batch, h);
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
  };
  // fresco's kernel (ops/conv3x3_wgmma.h, the product's): double partials, added on the host by verify
  fresco::sdk::ConvShape g{};
  g.n = batch, g.h = g.p = h, g.w = g.q = kW, g.c = g.cg = kC, g.k = g.kg = kK, g.r = g.s = 3, g.g = 1;
  g.sh = g.sw = g.ph = g.pw = g.dh = g.dw = 1;
  const FrDType fr_type = cudnn_type == CUDNN_DATA_HALF ? FR_F16 : FR_BF16;
  double* dpart = nullptr;
  CK(cudaMalloc(&dpart, fresco::cuda::conv3x3_wgmma_partials_bytes(sms)));
  int fresco_blocks = 0;
  auto fresco_kernel = [&] {
    fresco_blocks = fresco::cuda::launch_conv3x3_wgmma_forward(g, fr_type, x, w, y, dpart, sms, nullptr);
  };
  auto fresco_free = [&] {  // the MMA warpgroups issuing freely instead of taking turns (ping-pong)
    fresco_blocks = fresco::cuda::launch_conv3x3_wgmma_forward(g, fr_type, x, w, y, dpart, sms, nullptr,
                                                               fresco::cuda::Conv3x3Schedule::kFree);
  };
  auto own_fresco_free = [&] {
    fresco_free();
    finalize_kernel<<<1, kK>>>(dpart, fresco_blocks, sums);
  };
  auto own_fresco = [&] {
    fresco_kernel();
    finalize_kernel<<<1, kK>>>(dpart, fresco_blocks, sums);
  };
  auto own_wg = [&] {
    conv3x3_wgmma_kernel<T><<<blocks, kThreads, kSmem>>>(x, w, y, part, batch, h);
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
  };
  reference_kernel<T><<<4096, 256>>>(x, w, yref, batch, h);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> href(nx);
  CK(cudaMemcpy(href.data(), yref, nx * sizeof(float), cudaMemcpyDeviceToHost));
  std::vector<double> rs(2 * kK, 0.0);
  // the largest relative errors of y and of the sums against the reference (y as the kernel rounded it)
  auto verify = [&](auto fn, double& worst, double& rs_worst) {
    CK(cudaMemset(y, 0, nx * sizeof(T)));
    fn();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<T> hy(nx);
    std::vector<double> hs(2 * kK);
    CK(cudaMemcpy(hy.data(), y, nx * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), sums, 2 * kK * sizeof(double), cudaMemcpyDeviceToHost));
    worst = rs_worst = 0.0;
    std::fill(rs.begin(), rs.end(), 0.0);
    for (int64_t i = 0; i < nx; ++i) {
      const double got = to_float(hy[i]), want = href[i];
      worst = std::max(worst, std::fabs(got - want) / (0.05 + std::fabs(want)));
      rs[i % kK] += got, rs[kK + i % kK] += got * got;
    }
    for (int c = 0; c < 2 * kK; ++c)
      rs_worst = std::max(rs_worst, std::fabs(hs[c] - rs[c]) / (1.0 + std::fabs(rs[c])));
  };
  double worst = 0.0, rs_worst = 0.0, wg_worst = 0.0, wg_rs_worst = 0.0;
  verify(own, worst, rs_worst);
  if (kHasWgmmaHost) verify(own_wg, wg_worst, wg_rs_worst);
  double v3_worst = 0.0, v3_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_v3, v3_worst, v3_rs_worst);
  double fr_worst = 0.0, fr_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_fresco, fr_worst, fr_rs_worst);
  double free_worst = 0.0, free_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_fresco_free, free_worst, free_rs_worst);
  const fresco::bench::BestTimer timer;
  auto time_us = [&](auto fn) { return timer.us(fn, reps); };
  const float own_us = time_us(own);
  const float wg_us = kHasWgmmaHost ? time_us(own_wg) : -1.0f;
  const float v3_us = kHasWgmmaHost ? time_us(own_v3) : -1.0f;
  const float fresco_us = kHasWgmmaHost ? time_us(fresco_kernel) : -1.0f;  // the kernel alone
  const float free_us = kHasWgmmaHost ? time_us(fresco_free) : -1.0f;
  // cuDNN (legacy API, NHWC, tensor cores, fp32 accumulation): the fastest algorithm Find reports
  const fresco::bench::CudnnConv3x3 cudnn(cudnn_type, batch, kC, kK, h, kW);
  const cudnnHandle_t dnn = cudnn.dnn;
  const cudnnTensorDescriptor_t xd = cudnn.xd, yd = cudnn.yd;
  const cudnnFilterDescriptor_t wd = cudnn.wd;
  const cudnnConvolutionDescriptor_t cd = cudnn.cd;
  const float one = 1.0f, zero = 0.0f;
  int got = 0;
  auto dnn_fwd = [&] { cudnn.forward(x, w, y2); };
  dnn_fwd();
  CK(cudaDeviceSynchronize());
  const float dnn_us = time_us(dnn_fwd);
  const double flop = 2.0 * batch * h * kW * kK * kKDim;
  std::printf(
      "{\"bench\":\"conv3x3_probe\",\"dtype\":\"%s\",\"batch\":%d,\"mma_us\":%.2f,\"mma_tflops\":%.1f,"
      "\"y_max_rel_err\":%.3g,\"sums_max_rel_err\":%.3g,\"wgmma_us\":%.2f,\"wgmma_tflops\":%.1f,"
      "\"wgmma_y_max_rel_err\":%.3g,\"wgmma_sums_max_rel_err\":%.3g,\"wgmma_regw_us\":%.2f,"
      "\"wgmma_regw_tflops\":%.1f,\"wgmma_regw_y_max_rel_err\":%.3g,\"wgmma_regw_sums_max_rel_err\":%.3g,"
      "\"fresco_kernel_us\":%.2f,\"fresco_tflops\":%.1f,\"fresco_y_max_rel_err\":%.3g,"
      "\"fresco_sums_max_rel_err\":%.3g,\"fresco_free_kernel_us\":%.2f,\"fresco_free_y_max_rel_err\":%.3g,"
      "\"fresco_free_sums_max_rel_err\":%.3g,\"cudnn_legacy_us\":%"
      ".2f,\"cudnn_algo\":%d,\"blocks\":%d}\n",
      dtype_name, batch, own_us, flop / own_us * 1e-6, worst, rs_worst, wg_us, flop / wg_us * 1e-6, wg_worst,
      wg_rs_worst, v3_us, flop / v3_us * 1e-6, v3_worst, v3_rs_worst, fresco_us, flop / fresco_us * 1e-6,
      fr_worst, fr_rs_worst, free_us, free_worst, free_rs_worst, dnn_us, static_cast<int>(cudnn.perf[0].algo),
      blocks);
  // the gradients (timing only; tests/plugins/cuda/ops/test_conv3x3_wgmma.cpp checks their values): cuDNN's
  // fastest backward-data and backward-filter algorithms against fresco's kernels, y2 as dy
  cudnnConvolutionBwdDataAlgoPerf_t dperf[8];
  cudnnConvolutionBwdFilterAlgoPerf_t fperf[8];
  DK(cudnnFindConvolutionBackwardDataAlgorithm(dnn, wd, yd, cd, xd, 8, &got, dperf));
  DK(cudnnFindConvolutionBackwardFilterAlgorithm(dnn, xd, yd, cd, wd, 8, &got, fperf));
  const size_t gws_bytes =
      std::max({dperf[0].memory, fperf[0].memory,
                static_cast<size_t>(fresco::cuda::conv3x3_wgmma_wgrad_workspace(g, sms))});
  void* gws = nullptr;
  T* dw = nullptr;
  CK(cudaMalloc(&gws, gws_bytes));
  CK(cudaMalloc(&dw, nw * sizeof(T)));
  auto dnn_data = [&] {
    DK(cudnnConvolutionBackwardData(dnn, &one, wd, w, yd, y2, cd, dperf[0].algo, gws, gws_bytes, &zero, xd,
                                    y));
  };
  auto dnn_filter = [&] {
    DK(cudnnConvolutionBackwardFilter(dnn, &one, xd, x, yd, y2, cd, fperf[0].algo, gws, gws_bytes, &zero, wd,
                                      dw));
  };
  auto fresco_data = [&] {
    fresco::cuda::launch_conv3x3_wgmma_backward_data(g, fr_type, y2, w, y, sms, nullptr);
  };
  auto fresco_filter = [&] {
    fresco::cuda::launch_conv3x3_wgmma_backward_filter(g, fr_type, y2, x, dw, gws, sms, nullptr);
  };
  // with a batchnorm prologue (ops.h): the forward with its sums on x through it, without and with the
  // applied map written (into y2, the gradients' dy: its values do not matter to the timings)
  float* bn = nullptr;  // gamma 1, beta 0.1, mean 0, invstd 1: about half of x passes the relu
  CK(cudaMalloc(&bn, 4 * kC * sizeof(float)));
  {
    std::vector<float> h(4 * kC, 1.0f);
    for (int c = 0; c < kC; ++c) h[kC + c] = 0.1f, h[2 * kC + c] = 0.0f;
    CK(cudaMemcpy(bn, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  const fresco::cuda::Conv3x3Prologue pro{bn, bn + kC, bn + 2 * kC, bn + 3 * kC};
  auto fresco_prologue = [&] {
    fresco::cuda::launch_conv3x3_wgmma_forward(g, fr_type, x, w, y, dpart, sms, nullptr,
                                               fresco::cuda::kConv3x3Schedule, &pro);
  };
  auto fresco_prologue_stored = [&] {
    fresco::cuda::launch_conv3x3_wgmma_forward(g, fr_type, x, w, y, dpart, sms, nullptr,
                                               fresco::cuda::kConv3x3Schedule, &pro, y2);
  };
  // the input gradient with batchnorm's gradient epilogue (ops.h): masked by the prologue's batchnorm
  // recomputed from x, with the sums partials
  const fresco::cuda::Conv3x3GradSums gsums{pro, x, dpart};
  auto fresco_data_gsums = [&] {
    fresco::cuda::launch_conv3x3_wgmma_backward_data(g, fr_type, y2, w, y, sms, nullptr, &gsums);
  };
  // the input gradient with the join's epilogue (ops.h): the reference's float map as two maps of T (the
  // other gradient part and the mask source) and x as the batchnorm input; three distinct maps, so the bytes
  // read are the product's (their values do not matter to the timing)
  const fresco::cuda::Conv3x3JoinSums jsums{yref, reinterpret_cast<T*>(yref) + nx, x, bn + 2 * kC, dpart};
  auto fresco_data_join = [&] {
    fresco::cuda::launch_conv3x3_wgmma_backward_data(g, fr_type, y2, w, y, sms, nullptr, nullptr, &jsums);
  };
  std::printf(
      "{\"bench\":\"conv3x3_probe_gradients\",\"dtype\":\"%s\",\"batch\":%d,\"cudnn_data_us\":%.2f,"
      "\"cudnn_data_algo\":%d,\"fresco_data_us\":%.2f,\"cudnn_filter_us\":%.2f,\"cudnn_filter_algo\":%d,"
      "\"fresco_filter_us\":%.2f,\"fresco_fwd_sums_us\":%.2f,\"fresco_fwd_prologue_us\":%.2f,"
      "\"fresco_fwd_prologue_stored_us\":%.2f,\"fresco_data_gsums_us\":%.2f,\"fresco_data_join_us\":%.2f}\n",
      dtype_name, batch, time_us(dnn_data), static_cast<int>(dperf[0].algo),
      kHasWgmmaHost ? time_us(fresco_data) : -1.0f, time_us(dnn_filter), static_cast<int>(fperf[0].algo),
      kHasWgmmaHost ? time_us(fresco_filter) : -1.0f, kHasWgmmaHost ? time_us(fresco_kernel) : -1.0f,
      kHasWgmmaHost ? time_us(fresco_prologue) : -1.0f,
      kHasWgmmaHost ? time_us(fresco_prologue_stored) : -1.0f,
      kHasWgmmaHost ? time_us(fresco_data_gsums) : -1.0f, kHasWgmmaHost ? time_us(fresco_data_join) : -1.0f);
  CK(cudaFree(bn));
  auto fine = [](double y_err, double sums_err) { return y_err < 0.02 && sums_err < 1e-4; };
  const bool ok = fine(worst, rs_worst) &&
                  (!kHasWgmmaHost || (fine(wg_worst, wg_rs_worst) && fine(v3_worst, v3_rs_worst) &&
                                      fine(fr_worst, fr_rs_worst) && fine(free_worst, free_rs_worst)));
  return ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  return fresco::bench::probe_main(
      argc, argv, "bench_conv3x3_probe",
      [](auto tag, int batch, int reps, const char* dtype, cudnnDataType_t type) {
        return run<decltype(tag)>(batch, reps, dtype, type);
      });
}
