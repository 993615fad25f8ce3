// The tiling shared by fresco's Hopper 3x3 convolution kernels (ops/conv3x3_wgmma.cu: forward and input
// gradient; ops/conv3x3_wgmma_wgrad.cu: weight gradient): 64 channels, rows 32 positions wide, tiles of 4
// output rows whose zero-padded input window (6 rows x 34 columns) arrives by TMA as 8 chunk planes of 8
// channels, and the tensor maps that bring windows and rows. Internal to the two files.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda_common.h"

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

}  // namespace fresco::cuda::conv3x3
