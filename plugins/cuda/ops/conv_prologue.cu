// The batchnorm prologue as its own pass (ops/conv_prologue.h).
#include "ops/batchnorm_relu_mask.cuh"
#include "ops/conv_prologue.h"

namespace fresco::cuda {

namespace {
template <class T>
__global__ void prologue_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t c,
                                const sdk::BnPrologue bn, const T* __restrict__ r) {
  FR_CUDA_GRID_LOOP(i, total) {
    const int64_t k = i % c;
    const float2 ss = bn_scale_shift(bn.gamma[k], bn.beta[k], bn.mean[k], bn.invstd[k]);
    float v = bn_normalized(to_f(x[i]), ss.x, ss.y);
    if (r) v += to_f(r[i]);
    y[i] = from_f<T>(v > 0.0f ? v : 0.0f);
  }
}
}  // namespace

void launch_conv_prologue(FrDType dtype, const void* x, void* out, int64_t rows, int64_t c,
                          const sdk::BnPrologue& bn, cudaStream_t s, const void* r) {
  const int64_t total = rows * c;
  with_float_type(dtype, "conv prologue", [&](auto tag) {
    using T = decltype(tag);
    prologue_kernel<T><<<grid_for(total, 256, 0), 256, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                                               total, c, bn, static_cast<const T*>(r));
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
