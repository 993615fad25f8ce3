// fresco's own 3x3, 64 -> 64 channel convolution on Hopper's warpgroup MMA (ops/conv3x3_wgmma.h). Built for
// sm_90a only (a static library of its own, plugins/cuda/CMakeLists.txt).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <type_traits>

#include "ops/conv3x3_wgmma.h"
#include "ops/conv3x3_wgmma_tiles.cuh"
#include "ops/mma_sync.cuh"
#include "ops/wgmma.cuh"

namespace fresco::cuda {

using namespace conv3x3;  // NOLINT: the tiling constants and tensor maps shared by the two kernel files

namespace {

constexpr int kStageStride = kC + 8;       // T per staged position (144 bytes: no conflicts)
constexpr int kStage = kW * kStageStride;  // T per staged row
constexpr int kThreads = 384;              // MMA warpgroups 0, 1; helper warpgroup 2
// per MMA warpgroup: window full / empty [3], stage full / empty [2], join rows full / empty [2]
constexpr int kBarriers = 2 * 14;
constexpr size_t kSmem = 2 * 3 * kWin * 16 + 2 * 2 * kStage * 2 + kBarriers * 8 + 2 * kC * sizeof(float);
// The join prologue's staged residual (kResidual): per MMA warpgroup two buffers of one prologue part's
// vectors (3 per thread, 16 bytes each), the next part's copied while the current one's are read.
constexpr int kResParts = 3 * 128;  // uint4 per buffer
constexpr size_t kResOff = (kSmem + 15) / 16 * 16, kSmemRes = kResOff + 2 * 2 * kResParts * 16;
// The join epilogue's rows (Conv3x3JoinSums): per MMA warpgroup two slots, each one output row of the other
// gradient part, the mask source and the batchnorm input, 32 positions x 128 bytes each, 128-byte swizzled
// by the copy (so the MMA threads' reads meet no bank conflicts), 1024-byte aligned.
constexpr int kJoinRow = kW * kC * 2, kJoinSlot = 3 * kJoinRow;  // bytes
constexpr size_t kJoinOff = (kSmem + 1023) / 1024 * 1024, kSmemJoin = kJoinOff + 2 * 2 * kJoinSlot;

// The join epilogue's three maps, read by rows (boxes of 8 channels x 32 positions), and their pointers
// (the batchnorm input's for L2 prefetch, its saved mean).
CUtensorMap join_rows_map(const void* p, FrDType dtype, int64_t positions);  // below
struct JoinMaps {
  CUtensorMap map[3];  // the other gradient part, the mask source, the batchnorm input
  const void* ptr[3];
  const float* mean;
};

// This thread's A fragments of the weights [64 outputs][576 k] for every k-step: outputs c0 and c0 + 8,
// k = 16 ks + 2 tq, +1, +8, +9 (k = tap * 64 + input channel). With `flip` (the input gradient) the weights
// are read as wt[c][tap][k] = w[k][8 - tap][c], the kernel turned by 180 degrees with inputs and outputs
// swapped, so the forward kernel on dy computes dx: a pair (k, k + 1) of wt is then two 16-bit loads of w,
// once per block (a flipping kernel before each input gradient cost a launch on the backward's chain).
template <class T>
__device__ __forceinline__ void load_weight_fragments(const T* w, int c0, int tq, bool flip,
                                                      uint32_t (&a)[36][4]) {
  const auto* w16 = reinterpret_cast<const uint16_t*>(w);
  auto pair = [&](int o, int k) {
    if (!flip) return *reinterpret_cast<const uint32_t*>(w16 + o * kKDim + k);
    const uint16_t* p = w16 + ((k % kC) * kTaps + kTaps - 1 - k / kC) * kC + o;    // w[k % 64][8 - tap][o]
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[kKDim]) << 16);  // and output k + 1
  };
#pragma unroll
  for (int ks = 0; ks < 36; ++ks) {
    const int k = ks * 16 + 2 * tq;
    a[ks][0] = pair(c0, k), a[ks][1] = pair(c0 + 8, k), a[ks][2] = pair(c0, k + 8),
    a[ks][3] = pair(c0 + 8, k + 8);
  }
}

// The 36 wgmmas of one output row whose window row starts at shared address row_base, committed as one
// group. The window is chunk-major ([8 chunks][kCS positions][8 channels]), so a tap's B tile (16 channels x
// 32 positions) is four 128-byte core matrices per k-half at any position: SBO 128 bytes (8 positions), LBO
// one chunk plane. Descriptors: one base plus constants (uniform registers when row_base is).
template <class T>
__device__ __forceinline__ void issue_row(float (&acc)[16], const uint32_t (&a)[36][4], unsigned row_base) {
  const uint32_t lo = ((row_base >> 4) & 0x3FFF) | ((kCS * 16 >> 4) << 16);
  wg_fence();
#pragma unroll
  for (int ks = 0; ks < 36; ++ks) {
    const int tap = ks / 4, cc = ks % 4, r = tap / 3, s = tap % 3;
    const uint64_t desc = (static_cast<uint64_t>(128 >> 4) << 32) |
                          (lo + static_cast<uint32_t>((2 * cc) * kCS + r * kWinCols + s));
    wgmma32(acc, a[ks], desc, ks > 0, T{});
  }
  wg_commit();
}

// This lane's stmatrix row address in a staged row ([32 positions][kStageStride]): lane l stores row l % 8
// (a position) of matrix l / 8 = (position group within a pair, channel half), channels 16 wq + 8 mh ..
__device__ __forceinline__ unsigned stage_lane_address(unsigned stage, int lane, int wq) {
  const int i = lane >> 3, r = lane & 7;
  return stage + static_cast<unsigned>(((8 * (i >> 1) + r) * kStageStride + 16 * wq + 8 * (i & 1)) * 2);
}

// A completed row rounded to T and staged through stmatrix at this lane's address sb; on_pair(jj, mh, f0,
// f1) sees each rounded pair (channel c0 + 8 mh, positions 8 jj + 2 tq and + 1). acc[4 jj + 2 mh + e]:
// channel c0 + 8 mh, position 8 jj + 2 tq + e.
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
      on_pair(jj, mh, f0, f1);
    }
    stmatrix_x4_trans(sb + static_cast<unsigned>(16 * half * kStageStride * 2), p[0], p[1], p[2], p[3]);
  }
}

// f(jj, e, mh) for each of an MMA thread's 16 values of a row: position 8 jj + 2 tq + e, channel c0 + 8 mh
// (acc[4 jj + 2 mh + e]).
template <class F>
__device__ __forceinline__ void for_each_row_value(F f) {
#pragma unroll
  for (int jj = 0; jj < 4; ++jj)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int mh = 0; mh < 2; ++mh) f(jj, e, mh);
}

// Ping-pong turns of the two MMA warpgroups (named barriers 3 and 4, 256 threads): warpgroup 1 opens with
// one pass; each takes its turn before issuing a row and passes it after (warpgroup 1 not after its last),
// so one warpgroup's epilogue runs beside the other's wgmmas.
__device__ __forceinline__ void open_turns(int g) {
  if (g == 1) named_arrive(4, 256);
}
__device__ __forceinline__ void take_turn(int g) {
  named_sync(g == 0 ? 4 : 3, 256);
}
__device__ __forceinline__ void pass_turn(int g, bool last) {
  if (g == 0)
    named_arrive(3, 256);
  else if (!last)
    named_arrive(4, 256);
}

// Tiles (4 output rows of one image) go in pairs, one per MMA warpgroup: pair k of block b is tiles
// 2 (k gridDim.x + b) + g. Both warpgroups make the same number of steps; an odd last tile leaves one
// warpgroup computing a zero window (TMA past the last image) that it neither stores nor sums.
// part: the block's channel sums of y as stored (null: none). kTurns: the MMA warpgroups take turns issuing
// rows (else both issue whenever their window and staging buffer are ready). kPrologue: each MMA warpgroup
// rewrites the window of its next tile through the batchnorm prologue `bn` while its wgmmas run (a quarter
// per row: three of each thread's twelve vectors), then a barrier of its 128 threads hands it to the wgmmas.
// kGradSums (the input gradient's batchnorm epilogue, ops.h): y is masked by the fused relu of the batchnorm
// `bn` recomputed from its input bx (the values batchnorm_relu_mask.cuh's mask gives), and part gets the
// sums of y as stored and of y (bx - mean) instead of y's moments; each MMA thread loads its sixteen values
// of bx for a row while that row's wgmmas run.
// kJoin (the input gradient's join epilogue, Conv3x3JoinSums): each row rounded to T, the other gradient
// part added and the sum masked by the mask source (> 0), rounded again (add_relu_backward's bits), and part
// gets the sums of it and of it times (x - mean) as with kGradSums; the three rows come by TMA (the helper,
// two rows ahead, into L2 four ahead) into shared memory, where the MMA threads read them.
// kResidual (with kPrologue: the join prologue, ops.h): the prologue adds `res`, the join's other branch
// (x's shape), before the relu; each MMA thread copies the vectors of it that its next prologue part reads
// into shared memory (cp.async, two buffers per warpgroup) before reading the current part's, and
// prefetches the tile after next's rows into L2 while rewriting a window's first part.
template <class T, bool kTurns, bool kPrologue, bool kGradSums, bool kJoin = false, bool kResidual = false>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_wgmma_kernel(const T* __restrict__ w, T* __restrict__ y, double* __restrict__ part, int n, int h,
                         const __grid_constant__ CUtensorMap map, const Conv3x3Prologue bn,
                         T* __restrict__ applied, const T* __restrict__ bx, bool flip,
                         const __grid_constant__ JoinMaps jm, const T* __restrict__ res) {
  static_assert(!(kJoin && (kGradSums || kPrologue)), "one epilogue or prologue at a time");
  static_assert(!kResidual || kPrologue, "the residual is the join prologue's");
  constexpr bool kDoubleSums = kGradSums || kJoin;
  extern __shared__ __align__(1024) uint4 smem[];  // 1024: the join rows' swizzle
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);  // uniform to the compiler
  const int tiles_per_img = h / kRows, tiles = n * tiles_per_img;
  const int stride = gridDim.x * 2, pairs = (tiles + 1) / 2;
  const int my_tiles =
      static_cast<int>(blockIdx.x) < pairs ? (pairs - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const int rows = kRows * my_tiles;
  T* const stage_base = reinterpret_cast<T*>(smem + 6 * kWin);
  const unsigned bars = shared_address(stage_base + 4 * kStage);
  auto win_full = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + b) * 8); };
  auto win_empty = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + 3 + b) * 8); };
  auto stage_full = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + 6 + b) * 8); };
  auto stage_empty = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + 8 + b) * 8); };
  auto join_full = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + 10 + b) * 8); };
  auto join_empty = [&](int m, int b) { return bars + static_cast<unsigned>((m * 14 + 12 + b) * 8); };
  const unsigned join_base = shared_address(smem) + static_cast<unsigned>(kJoinOff);
  float* const coef = reinterpret_cast<float*>(stage_base + 4 * kStage) + kBarriers * 2;
  if (threadIdx.x == 0) {
    for (int m = 0; m < 2; ++m) {
      for (int b = 0; b < 3; ++b) mbar_init(win_full(m, b), 1), mbar_init(win_empty(m, b), 128);
      for (int b = 0; b < 2; ++b) mbar_init(stage_full(m, b), 128), mbar_init(stage_empty(m, b), 64);
      for (int b = 0; b < 2; ++b) mbar_init(join_full(m, b), 1), mbar_init(join_empty(m, b), 128);
    }
    mbar_init_fence();
  }
  if (kPrologue) prologue_coefficients(bn, coef);
  __syncthreads();
  if (g == 2) {  // ---- helper: threads 0-63 serve MMA warpgroup 0, 64-127 warpgroup 1
    lower_registers<40>();
    const int m = (threadIdx.x & 127) >> 6, ht = threadIdx.x & 63;
    const int first = blockIdx.x * 2 + m;
    const unsigned win = shared_address(smem + m * 3 * kWin);
    const T* stage = stage_base + m * 2 * kStage;
    auto load = [&](int k) {  // tile k's window into buffer k % 3, by TMA (thread 0 of the pair's helpers)
      const int t = first + k * stride;
      const bool real = t < tiles;
      const int img = real ? t / tiles_per_img : n, row0 = real ? (t % tiles_per_img) * kRows : 0;
      const unsigned bar = win_full(m, k % 3), dst = win + static_cast<unsigned>((k % 3) * kWin * 16);
      mbar_arrive_expect_tx(bar, kWinBytes);
      for (int c = 0; c < 8; ++c) tma_load_4d(dst + c * kCS * 16, &map, 8 * c, -1, row0 - 1, img, bar);
    };
    // kJoin: row jr's three rows into slot jr % 2 (thread 0 of the pair's helpers); a phantom tile's arrive
    // without bytes
    auto load_join = [&](int jr) {
      const int t = first + (jr / kRows) * stride;
      const unsigned bar = join_full(m, jr & 1),
                     dst = join_base + static_cast<unsigned>((m * 2 + (jr & 1)) * kJoinSlot);
      if (t >= tiles) {
        mbar_arrive(bar);
        return;
      }
      const int p0 = (t * kRows + jr % kRows) * kW;
      mbar_arrive_expect_tx(bar, kJoinSlot);
      for (int q = 0; q < 3; ++q) tma_load_2d(dst + q * kJoinRow, &jm.map[q], 0, p0, bar);
    };
    if (ht == 0) {
      for (int k = 0; k < 3 && k < my_tiles; ++k) load(k);
      if (kJoin)
        for (int jr = 0; jr < 2 && jr < rows; ++jr) load_join(jr);
    }
    for (int j = 0; j < rows; ++j) {
      const int k = j / kRows, t = first + k * stride;
      mbar_wait(stage_full(m, j & 1), (j >> 1) & 1);
      const T* src = stage + (j & 1) * kStage;
      uint4* dst = reinterpret_cast<uint4*>(y + (static_cast<int64_t>(t) * kRows + j % kRows) * kW * kC);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int v = ht + 64 * q, pos = v / 8, c = v % 8;
        if (t < tiles) dst[v] = *reinterpret_cast<const uint4*>(src + pos * kStageStride + c * 8);
      }
      mbar_arrive(stage_empty(m, j & 1));
      if constexpr (kJoin) {
        if (ht == 0 && j + 2 < rows) {  // row j's slot is free again (its MMA threads staged row j)
          mbar_wait(join_empty(m, j & 1), (j >> 1) & 1);
          load_join(j + 2);
        }
        const int jp = j + 4, tp = first + (jp / kRows) * stride;  // row j + 4 into L2
        if (jp < rows && tp < tiles && ht < 32)
          for (int q = 0; q < 3; ++q)
            prefetch_l2(static_cast<const T*>(jm.ptr[q]) + ((tp * kRows + jp % kRows) * kW + ht) * kC);
      }
      if (j % kRows == kRows - 1 && k + 3 < my_tiles && ht == 0) {  // tile k's buffer is free again
        mbar_wait(win_empty(m, k % 3), (k / 3) & 1);
        load(k + 3);
      }
    }
    return;
  }
  // ---- MMA warpgroups
  raise_registers<232>();
  const int wq = warp & 3, gid = lane >> 2, tq = lane & 3;
  uint32_t a[36][4];
  load_weight_fragments<T>(w, 16 * wq + gid, tq, flip, a);
  float ssum[2] = {0.0f, 0.0f}, ssq[2] = {0.0f, 0.0f};  // channels 16 wq + gid (+ 8) as stored
  // kGradSums: each row's float sums added into double (a gradient's sum cancels; in float over a thread's
  // thousand values it lost up to a percent of small channel totals in f16)
  double dsum[2] = {0.0, 0.0}, dsq[2] = {0.0, 0.0};
  // kGradSums: the mask's scale and shift and the mean of channels 16 wq + gid (+ 8); bx at this thread's
  // positions 8 jj + 2 tq + e of the row in flight
  float gscale[2], gshift[2], gmean[2];
  T xb[4][2][2];
  if constexpr (kGradSums) {
#pragma unroll
    for (int mh = 0; mh < 2; ++mh) {
      const int c = 16 * wq + gid + 8 * mh;
      const float2 ss = bn_scale_shift(bn.gamma[c], bn.beta[c], bn.mean[c], bn.invstd[c]);
      gscale[mh] = ss.x, gshift[mh] = ss.y, gmean[mh] = bn.mean[c];
    }
  }
  if constexpr (kJoin) {
#pragma unroll
    for (int mh = 0; mh < 2; ++mh) gmean[mh] = jm.mean[16 * wq + gid + 8 * mh];
  }
  // kJoin: this thread's value (jj, e, mh) in a join row: position p = 8 jj + 2 tq + e, its 16-byte chunk
  // 2 wq + mh stored at chunk (2 wq + mh) ^ (p % 8) (the copy's 128-byte swizzle)
  constexpr int kJoinRowT = kJoinRow / 2;  // T per join row
  auto join_at = [&](int jj, int e, int mh) {
    const int p = 8 * jj + 2 * tq + e;
    return p * kC + (((2 * wq + mh) ^ (p & 7)) << 3) + gid;
  };
  auto load_bx = [&](int j) {
    const int t = blockIdx.x * 2 + g + (j / kRows) * stride;
    const T* row = bx + (static_cast<int64_t>(t) * kRows + j % kRows) * kW * kC + 16 * wq + gid;
    for_each_row_value([&](int jj, int e, int mh) {
      xb[jj][e][mh] = t < tiles ? __ldg(row + (8 * jj + 2 * tq + e) * kC + 8 * mh) : T{};
    });
  };
  const unsigned win_base = shared_address(smem) + static_cast<unsigned>(g * 3 * kWin * 16);
  const unsigned stage_lane = stage_lane_address(shared_address(stage_base + g * 2 * kStage), lane, wq);
  // the prologue: this thread rewrites chunk plane t / 16 at columns 1 + t % 16 and 17 + t % 16 (t: its index
  // in the warpgroup) of every window row; part p of a tile's window is its vectors 3 p .. 3 p + 2
  const int pt = threadIdx.x & 127;
  const ChunkPrologue cp = kPrologue ? chunk_prologue(coef, pt >> 4) : ChunkPrologue{};
  auto tile_at = [&](int t) { return static_cast<int64_t>(t) * kRows * kW * kC + 8 * (pt >> 4); };
  // kResidual: prologue part q = 4 k + part's residual vectors, staged in buffer q % 2
  const unsigned res_base = shared_address(smem) + static_cast<unsigned>(kResOff + g * 2 * kResParts * 16);
  auto stage_part = [&](int q) {
    const int k = q / kRows, t = blockIdx.x * 2 + g + k * stride;
    if (k < my_tiles && t < tiles)
      stage_residual<T, 3>(res_base + static_cast<unsigned>((q & 1) * kResParts * 16), pt, res + tile_at(t),
                           1 + (pt & 15), 3 * (q % kRows), (t % tiles_per_img) * kRows, h);
    cp_async_commit();  // (empty past the last part: one group per part either way)
  };
  if (kResidual && my_tiles > 0) stage_part(0);
  auto prologue = [&](int k, int part) {
    const int t = blockIdx.x * 2 + g + k * stride;
    if (part == 0) mbar_wait(win_full(g, k % 3), (k / 3) & 1);
    const int q = k * kRows + part;
    if constexpr (kResidual) {
      const int tn = t + stride;  // the tile after: its residual rows (6 x 32 positions of 128 bytes) into L2
      if (part == 0 && tn < tiles) {
        const int row0 = (tn % tiles_per_img) * kRows;
        for (int p = pt; p < kWinRows * kW; p += 128) {
          const int r = row0 - 1 + p / kW;
          if (r >= 0 && r < h) prefetch_l2(res + static_cast<int64_t>(tn) * kRows * kW * kC + (p - kW) * kC);
        }
      }
      stage_part(q + 1);  // the next part's vectors, then wait for this one's
      cp_async_wait<1>();
    }
    if (t < tiles)
      prologue_vectors<T, 3, kResidual>(
          smem + (g * 3 + k % 3) * kWin + (pt >> 4) * kCS, cp, 1 + (pt & 15), 3 * part,
          (t % tiles_per_img) * kRows, h, applied ? applied + tile_at(t) : nullptr,
          reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(smem) + kResOff) +
              (g * 2 + (q & 1)) * kResParts + pt);
    if (part == kRows - 1) fence_proxy_async();  // the rewritten window, for the wgmmas (async proxy)
  };
  if (kPrologue && rows > 0) {
    for (int part = 0; part < kRows; ++part) prologue(0, part);
  }
  // row j: wait for its window (a tile's first row), issue its wgmmas (in turn with the other warpgroup)
  auto start = [&](float(&acc)[16], int j) {
    const int k = j / kRows, row = j % kRows;
    if (row == 0) {
      if (kPrologue)
        named_sync(7 + g, 128);  // every thread's part of the window is written
      else
        mbar_wait(win_full(g, k % 3), (k / 3) & 1);
      fence_proxy_async();
    }
    if (kTurns) take_turn(g);
    issue_row<T>(acc, a, win_base + static_cast<unsigned>(((k % 3) * kWin + row * kWinCols) * 16));
    if (kTurns) pass_turn(g, j + 1 == rows);
  };
  // row j's wgmmas are complete: free its window after a tile's last row, stage it for the helper
  auto finish = [&](float(&acc)[16], int j) {
    fence_regs(acc);
    const int k = j / kRows;
    if (j % kRows == kRows - 1) mbar_arrive(win_empty(g, k % 3));
    mbar_wait(stage_empty(g, j & 1), ((j >> 1) & 1) ^ 1);
    if constexpr (kGradSums) {  // the fused relu's mask, recomputed from bx
      for_each_row_value([&](int jj, int e, int mh) {
        if (!bn_relu_passes<T>(to_f(xb[jj][e][mh]), gscale[mh], gshift[mh])) acc[4 * jj + 2 * mh + e] = 0.0f;
      });
    }
    const T* jrow = reinterpret_cast<const T*>(reinterpret_cast<const char*>(smem) + kJoinOff +
                                               (g * 2 + (j & 1)) * kJoinSlot);
    // a phantom tile's join slot holds no rows (whatever the shared memory held: never summed)
    const bool real = blockIdx.x * 2 + g + k * stride < tiles;
    if constexpr (kJoin) {  // the row as stored, plus the other part, masked (add_relu_backward's bits)
      mbar_wait(join_full(g, j & 1), (j >> 1) & 1);
      for_each_row_value([&](int jj, int e, int mh) {
        float& v = acc[4 * jj + 2 * mh + e];
        const int at = join_at(jj, e, mh);
        const float sum = to_f(from_f<T>(v)) + to_f(jrow[at]);
        v = real && to_f(jrow[kJoinRowT + at]) > 0.0f ? sum : 0.0f;
      });
    }
    stage_row<T>(acc, stage_lane + static_cast<unsigned>((j & 1) * kStage * 2),
                 [&](int jj, int mh, float f0, float f1) {
                   if constexpr (kGradSums) {  // sum g and sum g (bx - mean) of the masked gradient
                     ssum[mh] += f0 + f1;
                     ssq[mh] +=
                         f0 * (to_f(xb[jj][0][mh]) - gmean[mh]) + f1 * (to_f(xb[jj][1][mh]) - gmean[mh]);
                   } else if constexpr (kJoin) {  // the same with x from the join row
                     if (real) {
                       ssum[mh] += f0 + f1;
                       ssq[mh] += f0 * (to_f(jrow[2 * kJoinRowT + join_at(jj, 0, mh)]) - gmean[mh]) +
                                  f1 * (to_f(jrow[2 * kJoinRowT + join_at(jj, 1, mh)]) - gmean[mh]);
                     }
                   } else {
                     ssum[mh] += f0 + f1, ssq[mh] += f0 * f0 + f1 * f1;
                   }
                 });
    if constexpr (kJoin) mbar_arrive(join_empty(g, j & 1));
    mbar_arrive(stage_full(g, j & 1));
    if constexpr (kDoubleSums) {
#pragma unroll
      for (int mh = 0; mh < 2; ++mh)
        dsum[mh] += ssum[mh], dsq[mh] += ssq[mh], ssum[mh] = 0.0f, ssq[mh] = 0.0f;
    }
  };
  float acc[16];
  if (kTurns && rows > 0) open_turns(g);
  for (int j = 0; j < rows; ++j) {
    start(acc, j);
    if (kPrologue && j / kRows + 1 < my_tiles) prologue(j / kRows + 1, j % kRows);
    if constexpr (kGradSums) {
      load_bx(j);
      // bx of row j + 2 into L2 (each thread of the first warp one position's 128 bytes): 8-10 us less
      // than loading every row from memory as it comes (bench/conv3x3_probe.cu)
      const int jp = j + 2, tp = blockIdx.x * 2 + g + (jp / kRows) * stride;
      if (jp < rows && tp < tiles && (threadIdx.x & 127) < 32)
        prefetch_l2(bx + ((static_cast<int64_t>(tp) * kRows + jp % kRows) * kW + (threadIdx.x & 31)) * kC);
    }
    wg_wait<0>();
    finish(acc, j);
  }
  if (!part) return;
  // the block's partials: this thread's channels c0 + 8 mh added over the four lanes of a gid, then the two
  // warpgroups in order through their first window buffers (no longer read); in float, or in double with the
  // gradient sums
  auto write_partials = [&](auto(&sums)[2], auto(&second)[2]) {
    using A = std::remove_reference_t<decltype(sums[0])>;
    A* red = reinterpret_cast<A*>(smem);  // [warpgroup][64][2] at each warpgroup's window base
    constexpr int kBase = 3 * kWin * 16 / sizeof(A);
#pragma unroll
    for (int mh = 0; mh < 2; ++mh) {
      A sa = sums[mh], sb = second[mh];
      add_over_lanes<1, 4>(sa, sb);
      const int c = 16 * wq + gid + 8 * mh;
      if (tq == 0) red[g * kBase + 2 * c] = sa, red[g * kBase + 2 * c + 1] = sb;
    }
    named_sync(6, 256);
    const int c = threadIdx.x;
    if (c < kC) {
      part[(blockIdx.x * kC + c) * 2] = static_cast<double>(red[2 * c]) + red[kBase + 2 * c];
      part[(blockIdx.x * kC + c) * 2 + 1] = static_cast<double>(red[2 * c + 1]) + red[kBase + 2 * c + 1];
    }
  };
  if constexpr (kDoubleSums)
    write_partials(dsum, dsq);
  else
    write_partials(ssum, ssq);
}

template <class T, bool kTurns, bool kPrologue, bool kGradSums = false, bool kJoin = false,
          bool kResidual = false>
int launch(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w, void* y, double* part,
           int sm_count, cudaStream_t s, const Conv3x3Prologue& bn, void* applied, const void* bx = nullptr,
           bool flip = false, const Conv3x3JoinSums* join = nullptr, const void* res = nullptr) {
  // its shared memory beyond the default 48 KB, set on the current device at each launch (captured once)
  constexpr size_t smem = kJoin ? kSmemJoin : kResidual ? kSmemRes : kSmem;
  FR_CUDA_CHECK(cudaFuncSetAttribute(conv3x3_wgmma_kernel<T, kTurns, kPrologue, kGradSums, kJoin, kResidual>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t pairs = (g.n * (g.h / kRows) + 1) / 2;
  const int blocks = static_cast<int>(std::min<int64_t>(std::max(sm_count, 1), pairs));
  JoinMaps jm{};
  if constexpr (kJoin) {
    const void* maps[3] = {join->b, join->mask, join->x};
    for (int q = 0; q < 3; ++q)
      jm.map[q] = join_rows_map(maps[q], dtype, g.n * g.h * kW), jm.ptr[q] = maps[q];
    jm.mean = join->mean;
  }
  conv3x3_wgmma_kernel<T, kTurns, kPrologue, kGradSums, kJoin, kResidual><<<blocks, kThreads, smem, s>>>(
      static_cast<const T*>(w), static_cast<T*>(y), part, static_cast<int>(g.n), static_cast<int>(g.h),
      window_map(x, dtype, g.n, g.h), bn, static_cast<T*>(applied), static_cast<const T*>(bx), flip, jm,
      static_cast<const T*>(res));
  FR_CUDA_LAUNCH_CHECK();
  return blocks;
}

// The prologue runs with the product's schedule only (kConv3x3Schedule).
template <class T>
int launch_schedule(Conv3x3Schedule schedule, const sdk::ConvShape& g, FrDType dtype, const void* x,
                    const void* w, void* y, double* part, int sm_count, cudaStream_t s,
                    const Conv3x3Prologue* bn, void* applied, bool flip, const void* res) {
  constexpr bool kProductTurns = kConv3x3Schedule == Conv3x3Schedule::kTurns;
  if (bn) {
    FR_PLUGIN_CHECK(schedule == kConv3x3Schedule && !flip, FR_ERR_INVALID_ARGUMENT,
                    "cuda conv3x3_wgmma: the batchnorm prologue runs with the product's schedule only");
    if (res)
      return launch<T, kProductTurns, true, false, false, true>(g, dtype, x, w, y, part, sm_count, s, *bn,
                                                                applied, nullptr, false, nullptr, res);
    return launch<T, kProductTurns, true>(g, dtype, x, w, y, part, sm_count, s, *bn, applied);
  }
  FR_PLUGIN_CHECK(!res, FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: a residual needs the batchnorm prologue");
  switch (schedule) {
    case Conv3x3Schedule::kTurns:
      return launch<T, true, false>(g, dtype, x, w, y, part, sm_count, s, Conv3x3Prologue{}, nullptr, nullptr,
                                    flip);
    case Conv3x3Schedule::kFree:
      return launch<T, false, false>(g, dtype, x, w, y, part, sm_count, s, Conv3x3Prologue{}, nullptr,
                                     nullptr, flip);
  }
  throw sdk::KernelError(FR_ERR_INVALID_ARGUMENT, "cuda conv3x3_wgmma: unknown schedule");
}

int launch_checked(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w, void* y,
                   double* part, int sm_count, cudaStream_t s, Conv3x3Schedule schedule,
                   const Conv3x3Prologue* bn, void* applied, bool flip = false, const void* res = nullptr) {
  FR_PLUGIN_CHECK(conv3x3_wgmma_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the convolution does not fit the kernel");
  FR_PLUGIN_CHECK(aligned16({x, w, y}), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: x, w and y must be 16-byte aligned");
  FR_PLUGIN_CHECK(!bn || (bn->gamma && bn->beta && bn->mean && bn->invstd), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the batchnorm prologue needs gamma, beta, mean and invstd");
  FR_PLUGIN_CHECK(!applied || (bn && aligned16({applied})), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the applied map needs a prologue and 16-byte alignment");
  FR_PLUGIN_CHECK(
      !res || (applied && aligned16({res})), FR_ERR_INVALID_ARGUMENT,
      "cuda conv3x3_wgmma: the join prologue's residual needs the applied map and 16-byte alignment");
  return dtype == FR_F16
             ? launch_schedule<__half>(schedule, g, dtype, x, w, y, part, sm_count, s, bn, applied, flip, res)
             : launch_schedule<__nv_bfloat16>(schedule, g, dtype, x, w, y, part, sm_count, s, bn, applied,
                                              flip, res);
}

}  // namespace

namespace {
// cuTensorMapEncodeTiled from the driver, through the runtime (the plugin links no libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    FR_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    FR_PLUGIN_CHECK(f != nullptr && q == cudaDriverEntryPointSuccess, FR_ERR_DEVICE,
                    "cuda conv3x3_wgmma: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A tensor map of a 16-bit map (rank dims, the innermost first, strides in bytes of dims 1..), read in boxes.
CUtensorMap tiled_map(const void* p, FrDType dtype, cuuint32_t rank, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box,
                      CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE) {
  CUtensorMap map;
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  const CUresult r = encode_tiled()(
      &map, dtype == FR_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank,
      const_cast<void*>(p), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  FR_PLUGIN_CHECK(r == CUDA_SUCCESS, FR_ERR_DEVICE,
                  "cuda conv3x3_wgmma: cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return map;
}

// The join epilogue's maps [positions, 64] read by output rows: boxes of 64 channels x 32 positions (whole
// 128-byte lines), 128-byte swizzled.
CUtensorMap join_rows_map(const void* p, FrDType dtype, int64_t positions) {
  const cuuint64_t dims[2] = {kC, static_cast<cuuint64_t>(positions)};
  const cuuint64_t strides[1] = {kC * 2};
  const cuuint32_t box[2] = {kC, kW};
  return tiled_map(p, dtype, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}
}  // namespace

CUtensorMap conv3x3::window_map(const void* x, FrDType dtype, int64_t n, int64_t h) {
  const cuuint64_t dims[4] = {kC, kW, static_cast<cuuint64_t>(h), static_cast<cuuint64_t>(n)};
  const cuuint64_t strides[3] = {kC * 2, kW * kC * 2, static_cast<cuuint64_t>(h) * kW * kC * 2};
  const cuuint32_t box[4] = {8, kWinCols, kWinRows, 1};
  return tiled_map(x, dtype, 4, dims, strides, box);
}

CUtensorMap conv3x3::rows_map(const void* y, FrDType dtype, int64_t positions) {
  const cuuint64_t dims[2] = {kC, static_cast<cuuint64_t>(positions)};
  const cuuint64_t strides[1] = {kC * 2};
  const cuuint32_t box[2] = {8, kRows * kW};
  return tiled_map(y, dtype, 2, dims, strides, box);
}

bool conv3x3_wgmma_available(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return false;
  cudaFuncAttributes attr{};  // an sm_90a image runs on compute capability 9.0 only
  return major == 9 && minor == 0 &&
         cudaFuncGetAttributes(&attr, conv3x3_wgmma_kernel<__half, false, false, false>) == cudaSuccess &&
         attr.binaryVersion == 90;
}

bool conv3x3_wgmma_fits(const sdk::ConvShape& g, FrDType dtype) {
  return (dtype == FR_F16 || dtype == FR_BF16) && g.g == 1 && g.r == 3 && g.s == 3 && g.sh == 1 &&
         g.sw == 1 && g.ph == 1 && g.pw == 1 && g.dh == 1 && g.dw == 1 && g.c == kC && g.k == kC &&
         g.w == kW && g.q == kW && g.p == g.h && g.h % kRows == 0 &&
         g.n * g.h * kW <= 0x7fffffff;  // positions index TMA boxes in int
}

uint64_t conv3x3_wgmma_partials_bytes(int sm_count) {
  return static_cast<uint64_t>(std::max(sm_count, 1)) * kC * 2 * sizeof(double);
}

int launch_conv3x3_wgmma_forward(const sdk::ConvShape& g, FrDType dtype, const void* x, const void* w,
                                 void* y, double* part, int sm_count, cudaStream_t s,
                                 Conv3x3Schedule schedule, const Conv3x3Prologue* prologue, void* applied,
                                 const void* residual) {
  return launch_checked(g, dtype, x, w, y, part, sm_count, s, schedule, prologue, applied, false, residual);
}

int launch_conv3x3_wgmma_backward_data(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* w,
                                       void* dx, int sm_count, cudaStream_t s, const Conv3x3GradSums* sums,
                                       const Conv3x3JoinSums* join) {
  FR_PLUGIN_CHECK(
      !(sums && join), FR_ERR_INVALID_ARGUMENT,
      "cuda conv3x3_wgmma: the input gradient takes the batchnorm epilogue or the join's, not both");
  if (join) {
    FR_PLUGIN_CHECK(conv3x3_wgmma_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                    "cuda conv3x3_wgmma: the convolution does not fit the kernel");
    FR_PLUGIN_CHECK(aligned16({dy, w, dx, join->b, join->mask, join->x}) && join->mean && join->part,
                    FR_ERR_INVALID_ARGUMENT,
                    "cuda conv3x3_wgmma: the join epilogue needs b, the mask source and x (16-byte aligned), "
                    "the batchnorm's mean and space for the partials");
    constexpr bool kTurns = kConv3x3Schedule == Conv3x3Schedule::kTurns;
    const Conv3x3Prologue none{};
    return dtype == FR_F16
               ? launch<__half, kTurns, false, false, true>(g, dtype, dy, w, dx, join->part, sm_count, s,
                                                            none, nullptr, nullptr, true, join)
               : launch<__nv_bfloat16, kTurns, false, false, true>(g, dtype, dy, w, dx, join->part, sm_count,
                                                                   s, none, nullptr, nullptr, true, join);
  }
  if (!sums)
    return launch_checked(g, dtype, dy, w, dx, nullptr, sm_count, s, kConv3x3Schedule, nullptr, nullptr,
                          true);
  const Conv3x3Prologue& bn = sums->bn;
  FR_PLUGIN_CHECK(conv3x3_wgmma_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the convolution does not fit the kernel");
  FR_PLUGIN_CHECK(aligned16({dy, dx, sums->bx}) && sums->part && bn.gamma && bn.beta && bn.mean && bn.invstd,
                  FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the gradient epilogue needs bx (16-byte aligned), the batchnorm's "
                  "gamma, beta, mean and invstd, and space for the partials");
  constexpr bool kTurns = kConv3x3Schedule == Conv3x3Schedule::kTurns;
  FR_PLUGIN_CHECK(aligned16({w}), FR_ERR_INVALID_ARGUMENT, "cuda conv3x3_wgmma: w must be 16-byte aligned");
  return dtype == FR_F16 ? launch<__half, kTurns, false, true>(g, dtype, dy, w, dx, sums->part, sm_count, s,
                                                               bn, nullptr, sums->bx, true)
                         : launch<__nv_bfloat16, kTurns, false, true>(
                               g, dtype, dy, w, dx, sums->part, sm_count, s, bn, nullptr, sums->bx, true);
}

}  // namespace fresco::cuda
