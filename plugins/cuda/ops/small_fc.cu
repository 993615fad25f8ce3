// Kernels of ops/small_fc.h: fc layers with at most 32 outputs in strict fp32. Every sum runs in an order
// fixed by the shapes (warp butterflies, rows in order, row chunks in order), so replays are bitwise equal.
#include "ops/small_fc.h"
#include "ops/small_fc_rows.cuh"

namespace fresco::cuda {

namespace {
constexpr int kWarps = 8;             // forward rows per block
constexpr int kGradCols = 32;         // weight gradient: columns per block
constexpr int kRowLanes = 8;          // weight gradient: row lanes per block
constexpr int64_t kChunkRows = 128;   // weight gradient: rows per chunk (16 per row lane) ...
constexpr int64_t kMaxChunks = 1024;  // ... up to this many chunks

// One warp per row: lanes stride over k four loads at a time, each lane keeps n partial dot products, and
// butterflies sum them. w is first copied to shared memory when it fits (w_shared).
template <int NMAX>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                   float* __restrict__ y, int64_t m, int n, int64_t k, bool relu, bool w_shared) {
  const float* wp = block_weights(w, n * k, w_shared);
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= m) return;  // the whole warp: row is warp-uniform
  float out = row_dots<NMAX>(x + row * k, wp, n, k, lane);
  if (lane < n) {
    if (b) out += b[lane];
    if (relu) out = out > 0.0f ? out : 0.0f;  // as the CPU: NaN -> 0
    y[row * n + lane] = out;
  }
}

// One thread per element of dx.
template <int NMAX>
__global__ void __launch_bounds__(256)
    input_grad_kernel(const float* __restrict__ dy, const float* __restrict__ w, float* __restrict__ dx,
                      int64_t m, int n, int64_t k) {
  const int64_t total = m * k;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, c = i - r * k;
    dx[i] = column_dot<NMAX>(dy + r * n, w, n, k, c);
  }
}

// Weight gradient over the columns of x plus one column of ones (c == k: the bias gradient). A block owns
// kGradCols columns and one chunk of rows; its kRowLanes row lanes each sum every kRowLanes-th row of the
// chunk, then lane 0 adds the lanes in order and writes the result (one chunk: dw and db directly) or the
// chunk's partial sums part[chunk][j][c] (several chunks: weight_grad_finish adds them in order).
template <int NMAX>
__global__ void __launch_bounds__(kGradCols* kRowLanes)
    weight_grad_kernel(const float* __restrict__ dy, const float* __restrict__ x, float* __restrict__ part,
                       float* __restrict__ dw, float* __restrict__ db, int64_t m, int n, int64_t k,
                       int64_t chunk_rows) {
  __shared__ float red[kRowLanes][NMAX][kGradCols];
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < m ? r0 + chunk_rows : m;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kGradCols + threadIdx.x;
  const bool live = c < k || (c == k && db);
  float acc[NMAX];
#pragma unroll
  for (int j = 0; j < NMAX; ++j) acc[j] = 0.0f;
  if (live) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const float xv = c < k ? x[r * k + c] : 1.0f;
      const float* d = dy + r * n;
#pragma unroll
      for (int j = 0; j < NMAX; ++j)
        if (j < n) acc[j] = fmaf(__ldg(d + j), xv, acc[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < NMAX; ++j) red[threadIdx.y][j][threadIdx.x] = acc[j];
  __syncthreads();
  if (threadIdx.y != 0 || !live) return;
  for (int j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int l = 0; l < kRowLanes; ++l) s += red[l][j][threadIdx.x];
    if (part)
      part[(static_cast<int64_t>(blockIdx.y) * n + j) * (k + 1) + c] = s;
    else if (c < k)
      dw[j * k + c] = s;
    else
      db[j] = s;
  }
}

// Second pass: each output adds its chunks' partial sums in chunk order.
__global__ void __launch_bounds__(256)
    weight_grad_finish(const float* __restrict__ part, float* __restrict__ dw, float* __restrict__ db,
                       int64_t chunks, int n, int64_t k) {
  const int64_t cols = k + 1, total = static_cast<int64_t>(n) * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i / cols, c = i - j * cols;
    if (c == k && !db) continue;
    float s = 0.0f;
    for (int64_t q = 0; q < chunks; ++q) s += part[q * total + i];
    if (c < k)
      dw[j * k + c] = s;
    else
      db[j] = s;
  }
}

struct Chunks {
  int64_t count, rows;
};
// Chunks of kChunkRows rows, or more rows once there would be over kMaxChunks (the grid's y dimension).
Chunks chunks_for(int64_t m) {
  int64_t rows = kChunkRows;
  if ((m + rows - 1) / rows > kMaxChunks) rows = (m + kMaxChunks - 1) / kMaxChunks;
  return {(m + rows - 1) / rows, rows};
}

unsigned blocks_for(int64_t items, int threads) {
  return grid_for(items, threads, 0);
}

template <int NMAX>
struct LaunchForward {
  static void run(const float* x, const float* w, const float* b, float* y, int64_t m, int n, int64_t k,
                  bool relu, cudaStream_t s) {
    const unsigned blocks = static_cast<unsigned>((m + kWarps - 1) / kWarps);
    const uint64_t shared = shared_weight_bytes(n, k);
    forward_kernel<NMAX><<<blocks, kWarps * 32, shared, s>>>(x, w, b, y, m, n, k, relu, shared > 0);
  }
};
template <int NMAX>
struct LaunchInputGrad {
  static void run(const float* dy, const float* w, float* dx, int64_t m, int n, int64_t k, cudaStream_t s) {
    input_grad_kernel<NMAX><<<blocks_for(m * k, 256), 256, 0, s>>>(dy, w, dx, m, n, k);
  }
};
template <int NMAX>
struct LaunchWeightGrad {
  static void run(const float* dy, const float* x, float* part, float* dw, float* db, int64_t m, int n,
                  int64_t k, Chunks ch, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>((k + 1 + kGradCols - 1) / kGradCols),
                    static_cast<unsigned>(ch.count));
    weight_grad_kernel<NMAX>
        <<<grid, dim3(kGradCols, kRowLanes), 0, s>>>(dy, x, part, dw, db, m, n, k, ch.rows);
  }
};

void check_shapes(int64_t m, int64_t n, int64_t k) {
  FR_PLUGIN_CHECK(m >= 1 && k >= 1 && n >= 1 && n <= kSmallFcMaxOutputs, FR_ERR_INVALID_ARGUMENT,
                  "cuda small fc: needs m, k >= 1 and 1 <= n <= 32, found m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k));
}
}  // namespace

void small_fc_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n,
                      int64_t k, bool relu, cudaStream_t s) {
  check_shapes(m, n, k);
  dispatch<LaunchForward>(static_cast<int>(n), x, w, b, y, m, static_cast<int>(n), k, relu, s);
  FR_CUDA_LAUNCH_CHECK();
}

void small_fc_input_grad(const float* dy, const float* w, float* dx, int64_t m, int64_t n, int64_t k,
                         cudaStream_t s) {
  check_shapes(m, n, k);
  dispatch<LaunchInputGrad>(static_cast<int>(n), dy, w, dx, m, static_cast<int>(n), k, s);
  FR_CUDA_LAUNCH_CHECK();
}

uint64_t small_fc_weight_grad_workspace(int64_t m, int64_t n, int64_t k) {
  const Chunks ch = chunks_for(m);
  return ch.count > 1 ? static_cast<uint64_t>(ch.count * n * (k + 1)) * sizeof(float) : 0;
}

void small_fc_weight_grad(const float* dy, const float* x, float* dw, float* db, int64_t m, int64_t n,
                          int64_t k, void* workspace, uint64_t workspace_bytes, cudaStream_t s) {
  check_shapes(m, n, k);
  const Chunks ch = chunks_for(m);
  FR_PLUGIN_CHECK(ch.count == 1 || (workspace && workspace_bytes >= small_fc_weight_grad_workspace(m, n, k)),
                  FR_ERR_INVALID_ARGUMENT, "cuda small fc: the weight gradient needs its workspace");
  float* part = ch.count > 1 ? static_cast<float*>(workspace) : nullptr;
  dispatch<LaunchWeightGrad>(static_cast<int>(n), dy, x, part, dw, db, m, static_cast<int>(n), k, ch, s);
  FR_CUDA_LAUNCH_CHECK();
  if (!part) return;
  weight_grad_finish<<<blocks_for(n * (k + 1), 256), 256, 0, s>>>(part, dw, db, ch.count, static_cast<int>(n),
                                                                  k);
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
