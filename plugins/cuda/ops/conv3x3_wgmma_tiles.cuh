// The tiling shared by fresco's Hopper 3x3 convolution kernels (ops/conv3x3_wgmma.cu: forward and input
// gradient; ops/conv3x3_wgmma_wgrad.cu: weight gradient): 64 channels, rows 32 positions wide, tiles of 4
// output rows whose zero-padded input window (6 rows x 34 columns) arrives by TMA as 8 chunk planes of 8
// channels, and the tensor maps that bring windows and rows. Internal to the two files.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda_common.h"
#include "ops/batchnorm_relu_mask.cuh"
#include "ops/conv3x3_wgmma.h"
#include "ops/wgmma.cuh"

namespace fresco::cuda::conv3x3 {

constexpr int kC = 64, kW = 32, kTaps = 9, kKDim = kTaps * kC;     // channels (in = out), row width, k = 576
constexpr int kRows = 4, kWinRows = kRows + 2, kWinCols = kW + 2;  // a tile: 4 output rows; its window
// One window buffer: 8 chunk planes (8 channels each) of kCS positions, 128-byte aligned for TMA.
constexpr int kCS = 208, kWin = 8 * kCS;                 // positions >= 6 x 34; uint4 per buffer
constexpr int kWinBytes = 8 * kWinRows * kWinCols * 16;  // what TMA brings per window

// x [n, h, 32, 64] read in windows: boxes of 8 channels x 34 columns x 6 rows x 1 image at (8 c, -1, row0 -
// 1, image); elements outside the map (the halo, rows above and below an image) arrive as zeros.
CUtensorMap window_map(const void* x, FrDType dtype, int64_t n, int64_t h);
// y [positions, 64] read in tiles: boxes of 8 channels x 128 positions (4 rows) at (8 c, 128 t).
CUtensorMap rows_map(const void* y, FrDType dtype, int64_t positions);

// The batchnorm prologue (ops.h, conv2d's input prologue): per channel scale and shift into coef[0..63] and
// coef[64..127] (shared memory) by threads 0-63 of the block, from the batchnorm's saved statistics with the
// apply pass's roundings (batchnorm_relu_mask.cuh). The caller synchronises before reading them.
__device__ __forceinline__ void prologue_coefficients(const Conv3x3Prologue& bn, float* coef) {
  const int c = static_cast<int>(threadIdx.x);
  if (c >= kC) return;
  const float2 ss = bn_scale_shift(bn.gamma[c], bn.beta[c], bn.mean[c], bn.invstd[c]);
  coef[c] = ss.x, coef[kC + c] = ss.y;
}

// One thread's part of the prologue over 16-byte vectors: the 8 channels of one chunk plane, scale and
// shift in registers.
struct ChunkPrologue {
  float scale[8], shift[8];
};
__device__ __forceinline__ ChunkPrologue chunk_prologue(const float* coef, int chunk) {
  ChunkPrologue p;
#pragma unroll
  for (int j = 0; j < 8; ++j) p.scale[j] = coef[8 * chunk + j], p.shift[j] = coef[kC + 8 * chunk + j];
  return p;
}

// Rewrites kN vectors of the chunk plane `plane` (of a window buffer whose tile starts at image row row0):
// this thread's vectors first .. first + kN - 1 of its twelve, vector v at window row v / 2, column col0 +
// 16 (v % 2), as relu(fma(x, scale, shift)) rounded to T: the values the batchnorm's apply pass would have
// stored. Rows outside the image and the padding columns stay zero.
// With `applied` (the tile's first position of the applied map, at the plane's channels) not null, the
// vectors of the tile's own rows (window rows 1-4) are also stored there.
// The vectors of the join's other branch (x's shape) that one thread's prologue part reads (kN of them,
// its vectors first .. first + kN - 1, as prologue_vectors numbers them), copied asynchronously (cp.async)
// into its kN slots of a staging buffer (slot i at staged + 16 (i * 128 + lane index in the warpgroup)):
// `res` is the tile's first position at the plane's channels; rows outside the image are not copied (the
// prologue never reads them). The caller commits the group.
template <class T, int kN>
__device__ __forceinline__ void stage_residual(unsigned staged, int pt, const T* res, int col0, int first,
                                               int row0, int h) {
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const int wr = (first + i) >> 1, r = row0 - 1 + wr, col = col0 + 16 * ((first + i) & 1);
    if (r >= 0 && r < h)  // window row wr, column col: the tile's position ((wr - 1), col - 1)
      cp_async16(staged + static_cast<unsigned>((i * 128 + pt) * 16), res + ((wr - 1) * kW + col - 1) * kC);
  }
}

// kResidual (the join prologue, ops.h): `res` is this thread's staged vectors of the join's other branch
// (stage_residual's slots, landed), and each value is relu(fma(x, scale, shift) + r), the sum in f32 (the
// bits of batchnorm_add's apply pass, ops/batchnorm.cu).
template <class T, int kN, bool kResidual = false>
__device__ __forceinline__ void prologue_vectors(uint4* plane, const ChunkPrologue& p, int col0, int first,
                                                 int row0, int h, T* applied, const uint4* res = nullptr) {
  uint4 v[kN], rv[kResidual ? kN : 1];
  bool in[kN];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const int wr = (first + i) >> 1, r = row0 - 1 + wr, col = col0 + 16 * ((first + i) & 1);
    in[i] = r >= 0 && r < h;
    if (in[i]) v[i] = plane[wr * kWinCols + col];
    if constexpr (kResidual) {
      if (in[i]) rv[i] = res[i * 128];
    }
  }
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if (!in[i]) continue;
    T* e = reinterpret_cast<T*>(&v[i]);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float f = bn_normalized(to_f(e[j]), p.scale[j], p.shift[j]);
      if constexpr (kResidual) f += to_f(reinterpret_cast<const T*>(&rv[i])[j]);
      e[j] = from_f<T>(f > 0.0f ? f : 0.0f);
    }
    const int wr = (first + i) >> 1, col = col0 + 16 * ((first + i) & 1);
    plane[wr * kWinCols + col] = v[i];
    if (applied && wr >= 1 && wr <= kRows)
      *reinterpret_cast<uint4*>(applied + ((wr - 1) * kW + col - 1) * kC) = v[i];
  }
}

}  // namespace fresco::cuda::conv3x3
