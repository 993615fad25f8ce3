// CUDA channel_affine: y = x * scale[c] + shift[c] (max(y, 0) with params.relu) on f32, f16 or bf16 maps, the
// apply step of batchnorm's folded inference form; 16-byte passes with each thread's scale and shift in
// registers where the channels allow (ops/channel_sums.cuh: fixed_channels_fit), one element per thread
// otherwise. y may alias x. Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "fresco/batchnorm_fold_checks.hpp"
#include "ops/channel_sums.cuh"

namespace fresco::cuda {

namespace {
__device__ __forceinline__ float affine(float x, float s, float b, int relu) {
  const float v = x * s + b;
  return relu && !(v > 0.0f) ? 0.0f : v;
}

template <class T>
__global__ void affine_kernel(const T* x, const float* scale, const float* shift, T* y, int64_t total,
                              int64_t c, int relu) {
  FR_CUDA_GRID_LOOP(i, total) {
    const int64_t ch = i % c;
    y[i] = from_f<T>(affine(to_f(x[i]), scale[ch], shift[ch], relu));
  }
}

template <class T>
__global__ void __launch_bounds__(kFixedThreads)
    affine_vec_kernel(const T* x, const float* scale, const float* shift, T* y, int64_t nvec, int64_t c,
                      int relu) {
  constexpr int V = Vec16<T>::kN;
  const int64_t ch = fixed_channel_base<T>(c), stride = static_cast<int64_t>(gridDim.x) * kFixedThreads;
  float s[V], b[V];
  load_channels(scale, ch, s);
  load_channels(shift, ch, b);
#pragma unroll 4
  for (int64_t i = fixed_first_vector<T>(); i < nvec; i += stride) {
    Vec16<T> a = load16(x, i);
#pragma unroll
    for (int j = 0; j < V; ++j) a.v[j] = from_f<T>(affine(to_f(a.v[j]), s[j], b[j], relu));
    store16(y, i, a);
  }
}
}  // namespace

FR_CUDA_KERNEL_RUN(channel_affine) {
  return sdk::guard([&] {
    const sdk::AffineShape sh = sdk::channel_affine_shape(call);
    const int relu = sdk::params<FrChannelAffineParams>(call).relu != 0;
    const int64_t total = sh.rows * sh.c;
    const int sm = ctx_of(ctx)->sm_count;
    cudaStream_t st = stream_of(call);
    with_float_type(call->in[0].dtype, "channel_affine", [&](auto tag) {
      using T = decltype(tag);
      const T* x = sdk::data<T>(call->in[0]);
      T* y = sdk::data<T>(call->out[0]);
      const float *scale = sdk::data<float>(call->in[1]), *shift = sdk::data<float>(call->in[2]);
      if (fixed_channels_fit<T>(sh.c) && vectorizable<T>(total, {x, y, scale, shift})) {
        const int64_t nv = total / Vec16<T>::kN;
        affine_vec_kernel<T>
            <<<grid_for(nv, kFixedThreads, sm), kFixedThreads, 0, st>>>(x, scale, shift, y, nv, sh.c, relu);
      } else {
        affine_kernel<T><<<grid_for(total, 256, sm), 256, 0, st>>>(x, scale, shift, y, total, sh.c, relu);
      }
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
