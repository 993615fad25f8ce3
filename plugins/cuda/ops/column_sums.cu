// db[n] = sum_r dy[r, n]: one thread per column, rows in order (deterministic, coalesced across the warp).
#include "ops/matmul_plan.h"

namespace fresco::cuda {

namespace {
__global__ void column_sums_kernel(const float* __restrict__ dy, float* __restrict__ db, int64_t m,
                                   int64_t n) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.0f;
  for (int64_t r = 0; r < m; ++r) s += dy[r * n + j];
  db[j] = s;
}
}  // namespace

void column_sums(const float* dy, float* db, int64_t m, int64_t n, cudaStream_t s) {
  const int threads = 128;
  column_sums_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, s>>>(dy, db, m, n);
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
