// Random contents for the scratch operands that time cuDNN's engine configurations at prepare
// (ops/conv_engine.cpp): uniform values in [-1, 1) from a counter hash, stored as f16 or bf16. Timing on
// zeros can rank kernels differently from real data (docs/decisions.md).
#include "ops/scratch_fill.h"

#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
__device__ __forceinline__ float hash_uniform(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
  h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
  return static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, uint32_t seed) {
  FR_CUDA_GRID_LOOP(i, n) {
    p[i] = from_f<T>(hash_uniform(static_cast<uint64_t>(i), seed));
  }
}
}  // namespace

void fill_scratch_random(FrDType dtype, void* p, int64_t n, uint32_t seed, int sm_count) {
  with_float_type(dtype, "scratch fill", [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n, 256, sm_count), 256>>>(static_cast<T*>(p), n, seed);
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
