// The weight gradient of fresco's Hopper 3x3, 64 -> 64 channel convolution (ops/conv3x3_wgmma.h):
// dw[k][r][s][c] = sum over positions of dy[pos][k] * x[pos shifted by (r - 1, s - 1)][c], a GEMM of M = 64
// output channels, N = 9 taps x 64 input channels and K = every position of the batch.
//
// Persistent blocks of four warpgroups. Per tile (4 output rows of one image) a producer thread brings the
// input window (as the forward's: 8 chunk planes of 6 x 34 positions, halo zero-filled) and the 128 rows
// of dy (8 chunk planes of 128 positions) by TMA into one of three stages. MMA warpgroup r (0, 1, 2) owns
// the taps (r, 0..2): per 16 positions it issues one m64n64k16 per tap with both operands from shared
// memory read transposed (positions along K; the 8 channels of a 16-byte row along M or N): A = dy^T, B =
// the window shifted by the tap, accumulating its three 64 x 64 tiles in registers over all its tiles (96
// registers of the 128 a 512-thread block leaves; A through ldmatrix into registers instead measured the
// same). A tile's wgmmas are issued before the previous tile's complete, which then frees its stage. At the
// end each block writes its 9 x 64 x 64 partial sums; a second kernel adds the blocks in a fixed order in
// double and writes dw in T. Results are the same on every run on one machine.
#include <algorithm>

#include "ops/conv3x3_wgmma.h"
#include "ops/conv3x3_wgmma_tiles.cuh"
#include "ops/mma_sync.cuh"
#include "ops/wgmma.cuh"

namespace fresco::cuda {

using namespace conv3x3;  // NOLINT: the tiling constants and tensor maps shared by the two kernel files

namespace {

constexpr int kThreads = 512;  // MMA warpgroups 0-2 (kernel rows r), producer warpgroup 3
constexpr int kStages = 3;
constexpr int kDyRows = kRows * kW;                                // 128 positions of dy per tile
constexpr int kDyBytes = 8 * kDyRows * 16;                         // 8 chunk planes
constexpr int kStageBytes = kWin * 16 + kDyBytes;                  // window, then dy
constexpr size_t kSmem = kStages * kStageBytes + 2 * kStages * 8;  // + full / empty mbarriers
constexpr int kPartFloats = kTaps * kC * kC;                       // one block's partial dw (tap, k, c)

template <class T>
__global__ void __launch_bounds__(kThreads, 1)
    conv3x3_wgmma_wgrad_kernel(float* __restrict__ part, int n, int h,
                               const __grid_constant__ CUtensorMap xmap,
                               const __grid_constant__ CUtensorMap dymap) {
  extern __shared__ __align__(128) uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);  // uniform to the compiler
  const int tiles_per_img = h / kRows, tiles = n * tiles_per_img;
  const int my_tiles =
      static_cast<int>(blockIdx.x) < tiles ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  const unsigned base = shared_address(smem);
  const unsigned bars = base + static_cast<unsigned>(kStages * kStageBytes);
  auto full = [&](int b) { return bars + static_cast<unsigned>(b * 8); };
  auto empty = [&](int b) { return bars + static_cast<unsigned>((kStages + b) * 8); };
  auto window = [&](int b) { return base + static_cast<unsigned>(b * kStageBytes); };
  auto dy_rows = [&](int b) { return window(b) + static_cast<unsigned>(kWin * 16); };
  if (threadIdx.x == 0) {
    for (int b = 0; b < kStages; ++b) mbar_init(full(b), 1), mbar_init(empty(b), 3 * 128);
    mbar_init_fence();
  }
  __syncthreads();
  if (g == 3) {  // ---- producer: one thread issues the copies
    lower_registers<56>();
    if (threadIdx.x != 3 * 128) return;
    for (int k = 0; k < my_tiles; ++k) {
      const int b = k % kStages, t = blockIdx.x + k * gridDim.x;
      if (k >= kStages) mbar_wait(empty(b), ((k / kStages) - 1) & 1);
      const int img = t / tiles_per_img, row0 = (t % tiles_per_img) * kRows;
      mbar_arrive_expect_tx(full(b), kWinBytes + kDyBytes);
      for (int c = 0; c < 8; ++c) {
        tma_load_4d(window(b) + static_cast<unsigned>(c * kCS * 16), &xmap, 8 * c, -1, row0 - 1, img,
                    full(b));
        tma_load_2d(dy_rows(b) + static_cast<unsigned>(c * kDyRows * 16), &dymap, 8 * c, t * kDyRows,
                    full(b));
      }
    }
    return;
  }
  // ---- MMA warpgroup g: taps (g, 0), (g, 1), (g, 2)
  raise_registers<152>();
  const int wq = warp & 3;
  float acc[3][32];
#pragma unroll
  for (int s = 0; s < 3; ++s)
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[s][i] = 0.0f;
  for (int k = 0; k < my_tiles; ++k) {
    const int b = k % kStages;
    mbar_wait(full(b), (k / kStages) & 1);
    // A = dy^T (64 channels k x 16 positions) at dy position 16 j: SBO a chunk plane (along M), LBO 8
    // positions (along K). B = the window at position (row + g) * 34 + 16 kk + s: SBO a chunk plane (along
    // N), LBO 8 positions.
    const uint64_t a_lo =
        ((dy_rows(b) >> 4) & 0x3FFF) | ((128 >> 4) << 16) | (static_cast<uint64_t>(kDyRows * 16 >> 4) << 32);
    const uint64_t b_lo =
        ((window(b) >> 4) & 0x3FFF) | ((128 >> 4) << 16) | (static_cast<uint64_t>(kCS * 16 >> 4) << 32);
    wg_fence();
#pragma unroll
    for (int j = 0; j < kRows * 2; ++j)
#pragma unroll
      for (int s = 0; s < 3; ++s)
        wgmma64_ss_mn(acc[s], a_lo + static_cast<uint64_t>(16 * j),
                      b_lo + static_cast<uint64_t>((j / 2 + g) * kWinCols + 16 * (j % 2) + s), 1, T{});
    wg_commit();
    // tile k - 1's wgmmas are complete (tile k's may still run: no drain between tiles; draining each tile
    // measured 3 us slower): its stage is free
    if (k > 0) {
      wg_wait<1>();
      mbar_arrive(empty((k - 1) % kStages));
    }
  }
  wg_wait<0>();
#pragma unroll
  for (int s = 0; s < 3; ++s) fence_regs(acc[s]);
  // acc[s][4 j + e]: output channel 16 wq + gid (+ 8 for e >= 2), input channel 8 j + 2 tq + (e & 1)
  const int gid = lane >> 2, tq = lane & 3;
  float* out = part + static_cast<size_t>(blockIdx.x) * kPartFloats;
#pragma unroll
  for (int s = 0; s < 3; ++s) {
    float* tap = out + (3 * g + s) * kC * kC;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int hi = 0; hi < 2; ++hi)
        *reinterpret_cast<float2*>(tap + (16 * wq + gid + 8 * hi) * kC + 8 * j + 2 * tq) =
            make_float2(acc[s][4 * j + 2 * hi], acc[s][4 * j + 2 * hi + 1]);
  }
}

// dw[k][tap][c] = the blocks' partials part[block][tap][k][c] added in block order (double), rounded once.
template <class T>
__global__ void wgrad_finalize_kernel(const float* __restrict__ part, int blocks, T* __restrict__ dw) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;  // (tap, k, c) in the partials' order
  if (i >= kPartFloats) return;
  double s = 0.0;
  for (int b = 0; b < blocks; ++b) s += part[static_cast<size_t>(b) * kPartFloats + i];
  const int tap = i / (kC * kC), k = (i / kC) % kC, c = i % kC;
  dw[(k * kTaps + tap) * kC + c] = static_cast<T>(static_cast<float>(s));
}

template <class T>
void launch(const sdk::ConvShape& g, FrDType dtype, const void* dy, const void* x, void* dw, float* part,
            int blocks, cudaStream_t s) {
  // its shared memory beyond the default 48 KB, set on the current device at each launch (captured once)
  FR_CUDA_CHECK(cudaFuncSetAttribute(conv3x3_wgmma_wgrad_kernel<T>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
  conv3x3_wgmma_wgrad_kernel<T>
      <<<blocks, kThreads, kSmem, s>>>(part, static_cast<int>(g.n), static_cast<int>(g.h),
                                       window_map(x, dtype, g.n, g.h), rows_map(dy, dtype, g.n * g.h * kW));
  FR_CUDA_LAUNCH_CHECK();
  wgrad_finalize_kernel<T><<<(kPartFloats + 255) / 256, 256, 0, s>>>(part, blocks, static_cast<T*>(dw));
  FR_CUDA_LAUNCH_CHECK();
}

int wgrad_blocks(const sdk::ConvShape& g, int sm_count) {
  return static_cast<int>(
      std::min<int64_t>(std::max(sm_count, 1), std::max<int64_t>(g.n * (g.h / kRows), 1)));
}

}  // namespace

uint64_t conv3x3_wgmma_wgrad_workspace(const sdk::ConvShape& g, int sm_count) {
  return static_cast<uint64_t>(wgrad_blocks(g, sm_count)) * kPartFloats * sizeof(float);
}

void launch_conv3x3_wgmma_backward_filter(const sdk::ConvShape& g, FrDType dtype, const void* dy,
                                          const void* x, void* dw, void* ws, int sm_count, cudaStream_t s) {
  FR_PLUGIN_CHECK(conv3x3_wgmma_fits(g, dtype), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: the convolution does not fit the kernel");
  FR_PLUGIN_CHECK(aligned16({dy, x, dw, ws}) && ws, FR_ERR_INVALID_ARGUMENT,
                  "cuda conv3x3_wgmma: dy, x, dw and the workspace must be 16-byte aligned");
  const int blocks = wgrad_blocks(g, sm_count);
  auto* part = static_cast<float*>(ws);
  if (dtype == FR_F16)
    launch<__half>(g, dtype, dy, x, dw, part, blocks, s);
  else
    launch<__nv_bfloat16>(g, dtype, dy, x, dw, part, blocks, s);
}

}  // namespace fresco::cuda
