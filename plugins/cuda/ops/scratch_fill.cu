// Non-zero contents for the scratch operands that time candidates at prepare (cuBLASLt configurations in
// ops/matmul_search.cu, cuDNN engine configurations in ops/conv_engine.cpp): a deterministic pattern of 2001
// values in [-scale, scale], stored as f32, f16 or bf16. Timing on zeros can rank kernels differently from
// real data (docs/decisions.md).
#include "ops/scratch_fill.h"

#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
template <class T>
__global__ void fill_kernel(T* x, int64_t n, float scale) {
  FR_CUDA_GRID_LOOP(i, n)
  x[i] = from_f<T>(scale * static_cast<float>((i * 2654435761u) % 2001u) / 1000.0f - scale);
}
}  // namespace

void fill_scratch(FrDType dtype, void* p, int64_t n, float scale, cudaStream_t s) {
  with_float_type(dtype, "scratch fill", [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<256, 256, 0, s>>>(static_cast<T*>(p), n, scale);
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
