// Probe: how fast can fresco's own tensor-core kernel run ResNet-18's stage-1 convolution (3x3, stride 1,
// pad 1, 64 -> 64 channels, 32x32 maps, NHWC fp16 / bf16) with batchnorm's per-channel sums of its output in
// the same kernel, against cuDNN on the same card? A diagnostic for the own-kernel route of
// docs/performance.md (cuDNN runs this shape at about 440 TFLOP/s, its weakest in the step), not part of the
// product: it links only the CUDA runtime and cuDNN.
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
// Variants 4-6 (session 15) keep variant 3's operands and pipeline them, tiles of 4 rows per warpgroup:
//   pipe:        independent warpgroups (own windows, triple-buffered; named barriers only), descriptors
//                from one uniform base plus constants, the epilogue rounding through stmatrix; optionally
//                ping-pong turns so one warpgroup's epilogue runs beside the other's wgmmas.
//   ws:          warp-specialized: two MMA warpgroups and a helper warpgroup that loads the windows and
//                finishes the rows (sums, stores), hand-offs through mbarriers, setmaxnreg 232 / 40.
//   ws_tma:      the same with the windows brought by TMA (one thread, 8 tensor copies per tile, the halo
//                zero-filled by the copy engine).
// Each is checked against a direct fp32-accumulating kernel (max relative error of y, of the sums). Measured
// on the H200 (bench/results/2026-12-04_h200_session15.json), kernel alone: ws_tma 75.8-76.9 us fp16 / bf16
// against cuDNN's 90.0-93.4 (which computes no sums); variants 1-3 148 / 135 / 115 us with the finalize.
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

#include "ops/mma_sync.cuh"

namespace {

// A failed CUDA or cuDNN call ends the probe with its location and message.
void check(bool ok, const char* file, int line, const char* expr, const char* message) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d %s: %s\n", file, line, expr, message);
  std::exit(1);
}
#define CK(x)                                                                 \
  do {                                                                        \
    const cudaError_t e_ = (x);                                               \
    check(e_ == cudaSuccess, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
  } while (0)
#define DK(x)                                                                           \
  do {                                                                                  \
    const cudnnStatus_t s_ = (x);                                                       \
    check(s_ == CUDNN_STATUS_SUCCESS, __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
  } while (0)

constexpr int kC = 64, kK = 64, kW = 32, kRowsPerTile = 8, kHaloRows = kRowsPerTile + 2, kHaloCols = kW + 2;
constexpr int kTaps = 9, kKDim = kTaps * kC;            // 576
constexpr int kHaloChunks = kHaloRows * kHaloCols * 8;  // 16-byte chunks (8 per position)
constexpr int kWeightChunks = kK * kKDim / 8;           // 4608
constexpr int kThreads = 256;
constexpr size_t kSmem = (2 * kHaloChunks + kWeightChunks) * 16;  // 2 x 43.5 KB + 72 KB

using fresco::cuda::ldmatrix_x4;
using fresco::cuda::mma;
using fresco::cuda::round2;
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
      for (int off = 4; off < 32; off <<= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, off);
        b += __shfl_xor_sync(0xffffffffu, b, off);
      }
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
// A no-swizzle shared-memory matrix descriptor: start address, LBO (bytes between core matrices along K) and
// SBO (bytes between core matrices along M / N), each in 16-byte units.
__device__ __forceinline__ uint64_t smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFF) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}
__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of wgmma's accumulators across the wait that completes them.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define FR_WGMMA_D                                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31])
#define FR_WGMMA_REGS                                                                                       \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"

// d (+)= a (64 x 16, registers) * b (16 x N, descriptor); accumulate = 0 overwrites d. NAME(d, a, desc,
// accumulate, T{}) for each 16-bit type.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FR_WGMMA_ASM(SHAPE, TYPE, REGS, PRED, ...)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\nwgmma.mma_async.sync.aligned." SHAPE \
               ".f32." TYPE "." TYPE " " REGS:__VA_ARGS__                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#else
#define FR_WGMMA_ASM(SHAPE, TYPE, REGS, PRED, ...) (void)0
#endif
#define FR_WGMMA(NAME, NREG, SHAPE, REGS, PRED, ...)                                          \
  __device__ __forceinline__ void NAME(float(&d)[NREG], const uint32_t(&a)[4], uint64_t desc, \
                                       int accumulate, __half) {                              \
    FR_WGMMA_ASM(SHAPE, "f16", REGS, PRED, __VA_ARGS__);                                      \
  }                                                                                           \
  __device__ __forceinline__ void NAME(float(&d)[NREG], const uint32_t(&a)[4], uint64_t desc, \
                                       int accumulate, __nv_bfloat16) {                       \
    FR_WGMMA_ASM(SHAPE, "bf16", REGS, PRED, __VA_ARGS__);                                     \
  }
FR_WGMMA(wgmma64, 32, "m64n64k16", FR_WGMMA_REGS, "%37", FR_WGMMA_D)

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

#define FR_WGMMA_D16                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FR_WGMMA_REGS16 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"

FR_WGMMA(wgmma32, 16, "m64n32k16", FR_WGMMA_REGS16, "%21", FR_WGMMA_D16)

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
    for (int off = 1; off < 4; off <<= 1) {
      sa += __shfl_xor_sync(0xffffffffu, sa, off);
      sb += __shfl_xor_sync(0xffffffffu, sb, off);
    }
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

// ---- Variant 4: variant 3's operands (weights as A in registers, the window as B), pipelined across
// warpgroups. The two warpgroups run independently (named barriers only), each on its own tiles of 4 output
// rows with its own three window buffers (the window of tile k + 2 loads while tile k computes), so one
// warpgroup's epilogue runs beside the other's wgmmas. Per row a warpgroup issues 36 m64n32k16 (one
// accumulator chain; the rate probe measured 810-960 TFLOP/s for that shape from registers), waits, rounds
// the row to T with stmatrix into a staging buffer (the channel sums from the same rounded pairs) and
// copies it out as 16-byte vectors. The descriptors come from one per-row base plus constants (warpgroup
// index broadcast, so the compiler keeps them in uniform registers). Chunk stride 205 positions (odd in
// 16-byte units: the 8 chunks of a position land in distinct banks).
constexpr int kRows4 = 4, kWinRows4 = kRows4 + 2, kChunkStride4 = kWinRows4 * kHaloCols + 1;  // 205
constexpr int kWin4 = 8 * kChunkStride4;     // uint4 per window buffer
constexpr int kStageStride4 = kK + 8;        // T per staged position (144 bytes)
constexpr int kStage4 = kW * kStageStride4;  // T per staged row
constexpr size_t kSmemV4 = 2 * 3 * kWin4 * 16 + 2 * 2 * kStage4 * 2;
constexpr int kWinChunks4 = kWinRows4 * kHaloCols * 8;  // 1632

// The window of output rows row0 .. row0 + 3 by kLoaders threads (chunk planes kCS positions apart):
// thread tid copies chunk tid % 8 of positions tid / 8 + (kLoaders / 8) q, a fixed count, unrolled for
// the MMA warpgroups (no divergent loop near the wgmmas). h = 0 gives a zero window.
template <int kLoaders, int kCS, class T>
__device__ __forceinline__ void load_window4(uint4* win, const T* x, int img, int row0, int h, int tid) {
  static_assert(kLoaders % 8 == 0 && kLoaders / 8 < kHaloCols, "whole positions, at most one row wrap");
  const int c = tid & 7;
  int pos = tid >> 3, hr = 0, hc = pos;
  const T* src0 = x + (static_cast<int64_t>(img) * h + row0 - 1) * kW * kC + c * 8 - kC;
  uint4* dst = win + c * kCS;
  constexpr int kCopies = (kWinChunks4 + kLoaders - 1) / kLoaders;
  constexpr int kUnroll = kLoaders >= 128 ? kCopies : 1;  // a helper warp with few registers keeps a loop
#pragma unroll kUnroll
  for (int q = 0; q < kCopies; ++q) {
    if ((q + 1) * kLoaders <= kWinChunks4 || pos < kWinRows4 * kHaloCols) {
      const int yr = row0 + hr - 1;
      const bool valid = yr >= 0 && yr < h && hc >= 1 && hc <= kW;
      cp_async16(dst + pos, valid ? src0 + (hr * kW + hc) * kC : x, valid);
    }
    pos += kLoaders / 8, hc += kLoaders / 8;
    if (hc >= kHaloCols) hc -= kHaloCols, ++hr;
  }
}

__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// This lane's stmatrix row address in a staged row ([32 positions][kStageStride4]): lane l stores row l % 8
// (a position) of matrix l / 8 = (position group within a pair, channel half), 8 channels 16 wq + 8 mh ..
__device__ __forceinline__ unsigned stage_lane_address(unsigned stage, int lane, int wq) {
  const int i = lane >> 3, r = lane & 7;
  return stage + static_cast<unsigned>(((8 * (i >> 1) + r) * kStageStride4 + 16 * wq + 8 * (i & 1)) * 2);
}

// The 36 wgmmas of one output row whose window row starts at row_base (chunk planes kCS positions apart),
// committed as one group. Descriptors: one base plus constants (uniform registers when row_base is).
template <int kCS, class T>
__device__ __forceinline__ void issue_row(float (&acc)[16], const uint32_t (&a)[36][4], unsigned row_base) {
  const uint32_t lo = ((row_base >> 4) & 0x3FFF) | ((kCS * 16 >> 4) << 16);
  wg_fence();
#pragma unroll
  for (int ks = 0; ks < 36; ++ks) {
    const int tap = ks / 4, cc = ks % 4, r = tap / 3, s = tap % 3;
    const uint64_t desc = (static_cast<uint64_t>(128 >> 4) << 32) |
                          (lo + static_cast<uint32_t>((2 * cc) * kCS + r * kHaloCols + s));
    wgmma32(acc, a[ks], desc, ks > 0, T{});
  }
  wg_commit();
}

// A completed row rounded to T and staged through stmatrix at this lane's address sb; on_pair(mh, f0, f1)
// sees each rounded pair (channel c0 + 8 mh, two positions). acc[4 jj + 2 mh + e]: channel c0 + 8 mh,
// position 8 jj + 2 tq + e.
template <class T, class OnPair>
__device__ __forceinline__ void stage_row(const float (&acc)[16], unsigned sb, OnPair on_pair) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {  // position groups 2 half, 2 half + 1
    uint32_t p[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {  // matrix m: position group 2 half + m / 2, channel half m % 2
      const int jj = 2 * half + m / 2, mh = m % 2;
      float f0, f1;
      p[m] = round2(acc[4 * jj + 2 * mh], acc[4 * jj + 2 * mh + 1], f0, f1, T{});
      on_pair(mh, f0, f1);
    }
    stmatrix_x4_trans(sb + static_cast<unsigned>(16 * half * kStageStride4 * 2), p[0], p[1], p[2], p[3]);
  }
}

// Ping-pong turns of the two MMA warpgroups (named barriers 3 and 4, 256 threads): warpgroup 1 opens with
// one pass; each takes its turn before issuing a row and passes it after (warpgroup 1 not after its last).
__device__ __forceinline__ void open_turns(int g) {
  if (g == 1) asm volatile("bar.arrive 4, 256;\n" ::: "memory");
}
__device__ __forceinline__ void take_turn(int g) {
  if (g == 0)
    asm volatile("bar.sync 4, 256;\n" ::: "memory");
  else
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}
__device__ __forceinline__ void pass_turn(int g, bool last) {
  if (g == 0)
    asm volatile("bar.arrive 3, 256;\n" ::: "memory");
  else if (!last)
    asm volatile("bar.arrive 4, 256;\n" ::: "memory");
}

// kLeaveOut (timing diagnostics only; 0 is the real kernel): 1 = no stores of y, 2 = no window loads after
// the first two tiles, 4 = no epilogue (no rounding, staging or stores; the accumulators only added into the
// sums, which are then wrong: without any use of them ptxas removes the wgmmas). kPingPong: the two
// warpgroups take turns issuing their rows' wgmmas (named barriers 3 and 4), so one's epilogue runs while
// the other's wgmmas do.
template <class T, int kLeaveOut = 0, bool kPingPong = false>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_pipe_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                        float* __restrict__ part, int n, int h) {
  extern __shared__ __align__(128) uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);  // uniform to the compiler
  const int wq = warp & 3, tid = threadIdx.x & 127;
  uint4* win = smem + g * 3 * kWin4;
  T* stage = reinterpret_cast<T*>(smem + 6 * kWin4) + g * 2 * kStage4;
  const int tiles_per_img = h / kRows4, tiles = n * tiles_per_img;
  // tile pairs (one per warpgroup) k * gridDim.x + blockIdx.x: both warpgroups make the same number of
  // steps (a count from blockIdx only, so the compiler sees uniform loops); an odd last tile leaves one
  // warpgroup computing on a stale window without storing or summing it.
  const int first = blockIdx.x * 2 + g, stride = gridDim.x * 2, pairs = (tiles + 1) / 2;
  const int my_tiles = blockIdx.x < pairs ? (pairs - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto load = [&](int k) {
    if (k < my_tiles && (k < 2 || !(kLeaveOut & 2))) {
      const int t = first + k * stride;
      if (t < tiles)
        load_window4<128, kChunkStride4>(win + (k % 3) * kWin4, x, t / tiles_per_img,
                                         (t % tiles_per_img) * kRows4, h, tid);
      else  // a phantom tile (odd tile count): a zero window, so its rows add nothing to the sums
        load_window4<128, kChunkStride4>(win + (k % 3) * kWin4, x, 0, 0, 0, tid);
    }
    cp_async_commit();
  };
  load(0);
  load(1);
  uint32_t a[36][4];
  const int c0 = 16 * wq + gid;
  load_weight_fragments(w, c0, tq, a);
  float ssum[2] = {0.0f, 0.0f}, ssq[2] = {0.0f, 0.0f};  // channels c0, c0 + 8
  const unsigned win_base = smem_addr(smem) + static_cast<unsigned>(g * 3 * kWin4 * 16);
  const unsigned stage_lane = stage_lane_address(smem_addr(stage), lane, wq);
  auto issue = [&](float(&acc)[16], int j) {  // row j (row j % 4 of tile j / 4)
    const int k = j / kRows4, row = j % kRows4;
    issue_row<kChunkStride4, T>(acc, a,
                                win_base + static_cast<unsigned>(((k % 3) * kWin4 + row * kHaloCols) * 16));
  };
  // row j's wgmmas are complete: round, stage, sum, and store it to out (nothing for a phantom tile)
  auto finish = [&](float(&acc)[16], int j, uint4* out) {
    fence_regs(acc);
    if (kLeaveOut & 4) {  // the accumulators still feed something, or ptxas drops the wgmmas
#pragma unroll
      for (int i = 0; i < 16; ++i) ssum[i & 1] += acc[i];
      return;
    }
    stage_row<T>(acc, stage_lane + static_cast<unsigned>((j & 1) * kStage4 * 2),
                 [&](int mh, float f0, float f1) { ssum[mh] += f0 + f1, ssq[mh] += f0 * f0 + f1 * f1; });
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
    if (out == nullptr || (kLeaveOut & 1)) return;
    uint4* dst = out + (j % kRows4) * (kW * kK / 8);
    const T* src = stage + (j & 1) * kStage4;
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int v = tid + 128 * q, pos = v / 8, c = v % 8;
      dst[v] = *reinterpret_cast<const uint4*>(src + pos * kStageStride4 + c * 8);
    }
  };
  const int rows = kRows4 * my_tiles;
  float acc[16];
  if (kPingPong && rows > 0) open_turns(g);
  uint4* out = nullptr;  // the first output row of the current tile
  for (int j = 0; j < rows; ++j) {
    if (j % kRows4 ==
        0) {  // window j / 4 is complete; tile j / 4 - 1 is done, its buffer takes tile j / 4 + 2
      const int t = first + (j / kRows4) * stride;
      out = t < tiles ? reinterpret_cast<uint4*>(y + static_cast<int64_t>(t) * kRows4 * kW * kK) : nullptr;
      cp_async_wait<1>();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
      load(j / kRows4 + 2);
    }
    if (kPingPong) take_turn(g);
    issue(acc, j);
    if (kPingPong) pass_turn(g, j + 1 == rows);
    wg_wait<0>();
    finish(acc, j, out);
  }
  cp_async_wait<0>();
  __syncthreads();
  write_warpgroup_partials(ssum, ssq, g, c0, tq, reinterpret_cast<float*>(smem), part);
}

// ---- Variant 5: warp-specialized. Two MMA warpgroups (as variant 4 with ping-pong turns) and a third
// warpgroup that loads the windows and finishes the rows: its threads 0-63 serve MMA warpgroup 0, 64-127
// warpgroup 1. An MMA warpgroup only waits for its window, issues a row's 36 wgmmas, rounds the row into a
// staging buffer with stmatrix and signals it; the helper threads add the staged row's channel sums and
// store it. Hand-offs through mbarriers: window full (the helpers' cp.async arrive on it), window empty (the
// MMA warpgroup, after a tile's last row), stage full / empty (two staging buffers per MMA warpgroup).
// Registers: the MMA warpgroups raise their limit to 232 (setmaxnreg), the helper lowers to 40.
constexpr int kThreadsV5 = 384;
constexpr size_t kSmemV5 = 2 * 3 * 8 * 208 * 16 + 2 * 2 * kStage4 * 2 + 16 * 8 * 2;  // + the mbarriers

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The mbarrier's pending count drops by one when this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// kTma: the windows come by TMA (one helper thread issues 8 tensor copies per tile, one per 8-channel chunk,
// the halo zero-filled by the copy engine) instead of the helpers' cp.async; chunk planes at 208 positions
// (128-byte aligned, as TMA needs).
template <class T, bool kTma = false>
__global__ void __launch_bounds__(kThreadsV5, 1)
    conv3x3_ws_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                      float* __restrict__ part, int n, int h, const __grid_constant__ CUtensorMap tmap) {
  constexpr int kCS = kTma ? 208 : kChunkStride4;  // chunk plane stride, positions
  constexpr int kWin = 8 * kCS;
  extern __shared__ __align__(128) uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tq = lane & 3;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);  // 0, 1: MMA; 2: helper
  const int tiles_per_img = h / kRows4, tiles = n * tiles_per_img;
  const int stride = gridDim.x * 2, pairs = (tiles + 1) / 2;
  const int my_tiles = blockIdx.x < pairs ? (pairs - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const int rows = kRows4 * my_tiles;
  // mbarriers, per MMA warpgroup m: win_full[3], win_empty[3], stage_full[2], stage_empty[2]
  const unsigned bars = smem_addr(smem + 6 * kWin) + static_cast<unsigned>(2 * 2 * kStage4 * 2);
  auto win_full = [&](int m, int b) { return bars + static_cast<unsigned>((m * 10 + b) * 8); };
  auto win_empty = [&](int m, int b) { return bars + static_cast<unsigned>((m * 10 + 3 + b) * 8); };
  auto stage_full = [&](int m, int b) { return bars + static_cast<unsigned>((m * 10 + 6 + b) * 8); };
  auto stage_empty = [&](int m, int b) { return bars + static_cast<unsigned>((m * 10 + 8 + b) * 8); };
  if (threadIdx.x == 0) {
    for (int m = 0; m < 2; ++m) {
      for (int b = 0; b < 3; ++b) mbar_init(win_full(m, b), kTma ? 1 : 64), mbar_init(win_empty(m, b), 128);
      for (int b = 0; b < 2; ++b) mbar_init(stage_full(m, b), 128), mbar_init(stage_empty(m, b), 64);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (g == 2) {  // ---- helper: windows in, rows out
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    const int m = (threadIdx.x & 127) >> 6, ht = threadIdx.x & 63;  // the MMA warpgroup served, thread
    const int first = blockIdx.x * 2 + m;
    uint4* win = smem + m * 3 * kWin;
    const T* stage = reinterpret_cast<const T*>(smem + 6 * kWin) + m * 2 * kStage4;
    auto load = [&](int k) {  // tile k into buffer k % 3 (a zero window for a phantom tile)
      const int t = first + k * stride;
      uint4* dst = win + (k % 3) * kWin;
      const bool real = t < tiles;
      const int img = real ? t / tiles_per_img : 0, row0 = real ? (t % tiles_per_img) * kRows4 : 0;
      if constexpr (kTma) {
        if (ht != 0) return;
        const unsigned bar = win_full(m, k % 3);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                     "r"(8 * kWinRows4 * kHaloCols * 16)
                     : "memory");
        for (int c = 0; c < 8; ++c)
          asm volatile(
              "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
              "%3, "
              "%4, %5}], [%6];\n" ::"r"(smem_addr(dst + c * kCS)),
              "l"(reinterpret_cast<uint64_t>(&tmap)), "r"(8 * c), "r"(-1), "r"(row0 - 1), "r"(real ? img : n),
              "r"(bar)
              : "memory");
        return;
      }
      load_window4<64, kCS>(dst, x, img, row0, real ? h : 0, ht);
      cp_async_mbar_arrive(win_full(m, k % 3));
    };
    for (int k = 0; k < 3 && k < my_tiles; ++k) load(k);
    float sum[8], sq[8];  // channels 8 (ht % 8) + i
#pragma unroll
    for (int i = 0; i < 8; ++i) sum[i] = sq[i] = 0.0f;
    for (int j = 0; j < rows; ++j) {
      const int k = j / kRows4, t = first + k * stride;
      mbar_wait(stage_full(m, j & 1), (j >> 1) & 1);
      const T* src = stage + (j & 1) * kStage4;
      uint4* dst = reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * kRows4 + j % kRows4) * kW * kK);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int v = ht + 64 * q, pos = v / 8, c = v % 8;
        const uint4 val = *reinterpret_cast<const uint4*>(src + pos * kStageStride4 + c * 8);
        const T* e = reinterpret_cast<const T*>(&val);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float f = static_cast<float>(e[i]);
          sum[i] += f, sq[i] += f * f;
        }
        if (t < tiles) dst[v] = val;
      }
      mbar_arrive(stage_empty(m, j & 1));
      if (j % kRows4 == kRows4 - 1 && k + 3 < my_tiles && (!kTma || ht == 0)) {  // tile k's window is free
        mbar_wait(win_empty(m, k % 3), (k / 3) & 1);
        load(k + 3);
      }
    }
    cp_async_wait<0>();
    // the block's partials: lanes 8 apart hold the same channels; then the four helper warps in order
#pragma unroll
    for (int i = 0; i < 8; ++i)
      for (int off = 8; off < 32; off <<= 1) {
        sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], off);
        sq[i] += __shfl_xor_sync(0xffffffffu, sq[i], off);
      }
    float* red = reinterpret_cast<float*>(smem + 6 * kWin);  // the staging buffers: [4 warps][64][2]
    asm volatile("bar.sync 5, 128;\n" ::: "memory");         // every helper is done with them
    const int hw = warp - 8;
    if (lane < 8)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        red[(hw * kK + 8 * lane + i) * 2] = sum[i], red[(hw * kK + 8 * lane + i) * 2 + 1] = sq[i];
    asm volatile("bar.sync 5, 128;\n" ::: "memory");
    add_slots(red, 4, part, threadIdx.x & 127);
    return;
  }
  // ---- MMA warpgroups
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  const int wq = warp & 3;
  uint32_t a[36][4];
  const int c0 = 16 * wq + gid;
  load_weight_fragments(w, c0, tq, a);
  const unsigned win_base = smem_addr(smem) + static_cast<unsigned>(g * 3 * kWin * 16);
  const unsigned stage_lane =
      stage_lane_address(smem_addr(reinterpret_cast<T*>(smem + 6 * kWin) + g * 2 * kStage4), lane, wq);
  float acc[16];
  if (rows > 0) open_turns(g);
  for (int j = 0; j < rows; ++j) {
    const int k = j / kRows4, row = j % kRows4;
    if (row == 0) {
      mbar_wait(win_full(g, k % 3), (k / 3) & 1);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    take_turn(g);
    issue_row<kCS, T>(acc, a, win_base + static_cast<unsigned>(((k % 3) * kWin + row * kHaloCols) * 16));
    pass_turn(g, j + 1 == rows);
    wg_wait<0>();
    fence_regs(acc);
    if (row == kRows4 - 1) mbar_arrive(win_empty(g, k % 3));
    mbar_wait(stage_empty(g, j & 1), ((j >> 1) & 1) ^ 1);
    stage_row<T>(acc, stage_lane + static_cast<unsigned>((j & 1) * kStage4 * 2), [](int, float, float) {});
    mbar_arrive(stage_full(g, j & 1));
  }
}

__global__ void finalize_kernel(const float* part, int blocks, double* sums) {
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
T from_float(float v);
template <>
__half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <class T>
float to_float(T v) {
  return static_cast<float>(v);
}

template <class T>
int run(int batch, int reps, const char* dtype_name, cudnnDataType_t cudnn_type) {
  const int h = 32;
  const int64_t nx = static_cast<int64_t>(batch) * h * kW * kC, nw = static_cast<int64_t>(kK) * kKDim;
  std::vector<T> hx(nx), hw(nw);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& v : hx) v = from_float<T>(d(rng));
  for (auto& v : hw) v = from_float<T>(0.06f * d(rng));
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
  CK(cudaFuncSetAttribute(conv3x3_pipe_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmemV4)));
  auto own_v4 = [&] {
    conv3x3_pipe_kernel<T><<<blocks, kThreads, kSmemV4>>>(x, w, y, part, batch, h);
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
  };
  auto pipe_left_out = [&](auto kernel) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemV4)));
    return [=] {
      kernel<<<blocks, kThreads, kSmemV4>>>(x, w, y, part, batch, h);
      finalize_kernel<<<1, kK>>>(part, blocks, sums);
    };
  };
  auto v4_no_store = pipe_left_out(conv3x3_pipe_kernel<T, 1>);
  auto v4_no_load = pipe_left_out(conv3x3_pipe_kernel<T, 2>);
  auto v4_no_epilogue = pipe_left_out(conv3x3_pipe_kernel<T, 4>);
  auto v4_mma_only = pipe_left_out(conv3x3_pipe_kernel<T, 6>);
  auto v4_pingpong = pipe_left_out(conv3x3_pipe_kernel<T, 0, true>);
  auto v4_pingpong_no_epilogue = pipe_left_out(conv3x3_pipe_kernel<T, 4, true>);
  auto kernel_only = [&](auto kernel) {  // without the finalize: the kernel against cuDNN's
    return [=] { kernel<<<blocks, kThreads, kSmemV4>>>(x, w, y, part, batch, h); };
  };
  // the input as a 4-d tensor map (channels, columns, rows, images) for the TMA variant: boxes of 8 channels
  // x 34 columns x 6 rows x 1 image, out-of-range elements zero-filled
  CUtensorMap tmap;
  {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q));
    check(fn != nullptr && q == cudaDriverEntryPointSuccess, __FILE__, __LINE__, "cuTensorMapEncodeTiled",
          "not found");
    const cuuint64_t dims[4] = {kC, kW, static_cast<cuuint64_t>(h), static_cast<cuuint64_t>(batch)};
    const cuuint64_t strides[3] = {kC * sizeof(T), kW * kC * sizeof(T),
                                   static_cast<cuuint64_t>(h) * kW * kC * sizeof(T)};
    const cuuint32_t box[4] = {8, kHaloCols, kWinRows4, 1}, estr[4] = {1, 1, 1, 1};
    const CUresult r = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(
        &tmap,
        cudnn_type == CUDNN_DATA_HALF ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
        x, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    check(r == CUDA_SUCCESS, __FILE__, __LINE__, "cuTensorMapEncodeTiled", "failed");
  }
  CK(cudaFuncSetAttribute(conv3x3_ws_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmemV5)));
  CK(cudaFuncSetAttribute(conv3x3_ws_kernel<T, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(kSmemV5)));
  auto ws_kernel = [=] {
    conv3x3_ws_kernel<T><<<blocks, kThreadsV5, kSmemV5>>>(x, w, y, part, batch, h, tmap);
  };
  auto tma_kernel = [=] {
    conv3x3_ws_kernel<T, true><<<blocks, kThreadsV5, kSmemV5>>>(x, w, y, part, batch, h, tmap);
  };
  auto own_tma = [=] {
    tma_kernel();
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
  };
  auto own_ws = [=] {
    ws_kernel();
    finalize_kernel<<<1, kK>>>(part, blocks, sums);
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
  double v4_worst = 0.0, v4_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_v4, v4_worst, v4_rs_worst);
  double ws_worst = 0.0, ws_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_ws, ws_worst, ws_rs_worst);
  double tma_worst = 0.0, tma_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(own_tma, tma_worst, tma_rs_worst);
  double pp_worst = 0.0, pp_rs_worst = 0.0;
  if (kHasWgmmaHost) verify(v4_pingpong, pp_worst, pp_rs_worst);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time_us = [&](auto fn) {
    float best = 1e30f;
    for (int r = 0; r < 3; ++r) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < reps; ++i) fn();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0.0f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms * 1000.0f / reps);
    }
    return best;
  };
  const float own_us = time_us(own);
  const float wg_us = kHasWgmmaHost ? time_us(own_wg) : -1.0f;
  const float v3_us = kHasWgmmaHost ? time_us(own_v3) : -1.0f;
  const float v4_us = kHasWgmmaHost ? time_us(own_v4) : -1.0f;
  if (kHasWgmmaHost)
    std::printf(
        "{\"bench\":\"conv3x3_probe_left_out\",\"dtype\":\"%s\",\"pipe_no_store_us\":%.2f,"
        "\"pipe_no_load_us\":%.2f,\"pipe_no_epilogue_us\":%.2f,\"pipe_mma_only_us\":%.2f,"
        "\"pingpong_us\":%.2f,\"pingpong_no_epilogue_us\":%.2f,\"pingpong_y_max_rel_err\":%.3g,"
        "\"pingpong_sums_max_rel_err\":%.3g,\"pipe_kernel_only_us\":%.2f,\"pingpong_kernel_only_us\":%.2f,"
        "\"ws_kernel_only_us\":%.2f,\"ws_y_max_rel_err\":%.3g,\"ws_sums_max_rel_err\":%.3g,"
        "\"ws_tma_kernel_only_us\":%.2f,\"ws_tma_y_max_rel_err\":%.3g,\"ws_tma_sums_max_rel_err\":%.3g}\n",
        dtype_name, time_us(v4_no_store), time_us(v4_no_load), time_us(v4_no_epilogue), time_us(v4_mma_only),
        time_us(v4_pingpong), time_us(v4_pingpong_no_epilogue), pp_worst, pp_rs_worst,
        time_us(kernel_only(conv3x3_pipe_kernel<T, 0>)),
        time_us(kernel_only(conv3x3_pipe_kernel<T, 0, true>)), time_us(ws_kernel), ws_worst, ws_rs_worst,
        time_us(tma_kernel), tma_worst, tma_rs_worst);
  // cuDNN (legacy API, NHWC, tensor cores, fp32 accumulation): the fastest algorithm Find reports
  cudnnHandle_t dnn;
  DK(cudnnCreate(&dnn));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  DK(cudnnCreateTensorDescriptor(&xd));
  DK(cudnnCreateTensorDescriptor(&yd));
  DK(cudnnCreateFilterDescriptor(&wd));
  DK(cudnnCreateConvolutionDescriptor(&cd));
  DK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, cudnn_type, batch, kC, h, kW));
  DK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, cudnn_type, batch, kK, h, kW));
  DK(cudnnSetFilter4dDescriptor(wd, cudnn_type, CUDNN_TENSOR_NHWC, kK, kC, 3, 3));
  DK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DK(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int got = 0;
  DK(cudnnFindConvolutionForwardAlgorithm(dnn, xd, wd, cd, yd, 8, &got, perf));
  size_t ws_bytes = perf[0].memory;
  void* ws = nullptr;
  if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
  const float one = 1.0f, zero = 0.0f;
  auto dnn_fwd = [&] {
    DK(cudnnConvolutionForward(dnn, &one, xd, x, wd, w, cd, perf[0].algo, ws, ws_bytes, &zero, yd, y2));
  };
  dnn_fwd();
  CK(cudaDeviceSynchronize());
  const float dnn_us = time_us(dnn_fwd);
  const double flop = 2.0 * batch * h * kW * kK * kKDim;
  std::printf(
      "{\"bench\":\"conv3x3_probe\",\"dtype\":\"%s\",\"batch\":%d,\"mma_us\":%.2f,\"mma_tflops\":%.1f,"
      "\"y_max_rel_err\":%.3g,\"sums_max_rel_err\":%.3g,\"wgmma_us\":%.2f,\"wgmma_tflops\":%.1f,"
      "\"wgmma_y_max_rel_err\":%.3g,\"wgmma_sums_max_rel_err\":%.3g,\"wgmma_regw_us\":%.2f,"
      "\"wgmma_regw_tflops\":%.1f,\"wgmma_regw_y_max_rel_err\":%.3g,\"wgmma_regw_sums_max_rel_err\":%.3g,"
      "\"wgmma_pipe_us\":%.2f,\"wgmma_pipe_tflops\":%.1f,\"wgmma_pipe_y_max_rel_err\":%.3g,"
      "\"wgmma_pipe_sums_max_rel_err\":%.3g,\"cudnn_legacy_us\":%.2f,\"cudnn_algo\":%d,\"blocks\":%d}\n",
      dtype_name, batch, own_us, flop / own_us * 1e-6, worst, rs_worst, wg_us, flop / wg_us * 1e-6, wg_worst,
      wg_rs_worst, v3_us, flop / v3_us * 1e-6, v3_worst, v3_rs_worst, v4_us, flop / v4_us * 1e-6, v4_worst,
      v4_rs_worst, dnn_us, static_cast<int>(perf[0].algo), blocks);
  auto fine = [](double y_err, double sums_err) { return y_err < 0.02 && sums_err < 1e-4; };
  const bool ok = fine(worst, rs_worst) &&
                  (!kHasWgmmaHost || (fine(wg_worst, wg_rs_worst) && fine(v3_worst, v3_rs_worst) &&
                                      fine(v4_worst, v4_rs_worst) && fine(pp_worst, pp_rs_worst) &&
                                      fine(ws_worst, ws_rs_worst) && fine(tma_worst, tma_rs_worst)));
  return ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 512, reps = 20;
  std::string dtype = "fp16";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--batch")
      batch = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--dtype")
      dtype = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: bench_conv3x3_probe [--batch 512] [--dtype fp16|bf16] [--reps 20]\n");
      return 64;
    }
  }
  if (batch < 1 || reps < 1 || (dtype != "fp16" && dtype != "bf16")) {
    std::fprintf(stderr, "bench_conv3x3_probe: bad arguments\n");
    return 64;
  }
  return dtype == "fp16" ? run<__half>(batch, reps, "fp16", CUDNN_DATA_HALF)
                         : run<__nv_bfloat16>(batch, reps, "bf16", CUDNN_DATA_BFLOAT16);
}
