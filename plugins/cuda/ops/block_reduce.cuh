// Deterministic block-wide sums in double: every thread contributes its partial, the tree over shared memory
// has a fixed shape for a given blockDim (a power of two), so the result does not depend on scheduling.
#pragma once

namespace fresco::cuda {

constexpr int kReduceThreads = 256;

// Sums v over the block (blockDim.x == kReduceThreads); every thread gets the total. `buf` holds
// kReduceThreads doubles of shared memory; the call synchronises the block.
__device__ inline double block_sum(double v, double* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  const double total = buf[0];
  __syncthreads();
  return total;
}

}  // namespace fresco::cuda
