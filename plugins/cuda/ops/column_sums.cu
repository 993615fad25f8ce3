// Masked column sums for fc backward, deterministic: a block owns 32 columns; its 32 x 16 threads each sum a
// fixed strided subset of rows (masking dy in place with the fused relu's output y where given), then one
// thread per column adds the 16 partial sums in order. Coalesced 128-byte row segments; the order depends
// only on m and n.
#include "ops/matmul_plan.h"

namespace fresco::cuda {

namespace {
constexpr int kCols = 32, kRowLanes = 16;

__global__ void __launch_bounds__(kCols* kRowLanes)
    mask_and_column_sums_kernel(float* __restrict__ dy, const float* __restrict__ y, float* __restrict__ db,
                                int64_t m, int64_t n) {
  __shared__ float part[kRowLanes][kCols];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float s = 0.0f;
  if (j < n) {
    for (int64_t r = threadIdx.y; r < m; r += kRowLanes) {
      float v = dy[r * n + j];
      if (y) {
        v = y[r * n + j] > 0.0f ? v : 0.0f;
        dy[r * n + j] = v;
      }
      s += v;
    }
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n && db) {
    float t = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) t += part[i][threadIdx.x];
    db[j] = t;
  }
}
}  // namespace

void mask_and_column_sums(float* dy, const float* y, float* db, int64_t m, int64_t n, cudaStream_t s) {
  const dim3 block(kCols, kRowLanes);
  mask_and_column_sums_kernel<<<static_cast<unsigned>((n + kCols - 1) / kCols), block, 0, s>>>(dy, y, db, m,
                                                                                               n);
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
