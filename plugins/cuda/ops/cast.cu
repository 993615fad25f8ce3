// CUDA casts between f32, f16 and bf16 (ops.h): `cast` converts one tensor (mixed precision's boundary
// between low-precision maps and fp32 layers), `cast_range` a whole region range in one kernel (W -> A
// weights, G16 -> G gradients). Rounding to nearest even; NaN and inf are kept. Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include <type_traits>

#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  FR_CUDA_GRID_LOOP(i, n) y[i] = from_f<D>(to_f(x[i]));
}

// Four values per thread, the f32 side one 16-byte word, the 16-bit side 8 bytes: the whole-region casts of
// mixed precision (W -> A, G16 -> G, 11M values per ResNet-18 step) ran at 2.3-2.9 TB/s one value per thread
// (W -> A 29 -> 18 us with eight values per thread; G16 -> G was slower that way, two stores per load).
template <class T>
struct Vec4 {
  using Word = std::conditional_t<sizeof(T) == 4, uint4, uint2>;  // the four values as one load / store
  T v[4];
};
template <class T>
__device__ __forceinline__ Vec4<T> load4(const T* p, int64_t i) {
  const typename Vec4<T>::Word u = reinterpret_cast<const typename Vec4<T>::Word*>(p)[i];
  Vec4<T> r;
  memcpy(r.v, &u, sizeof u);
  return r;
}
template <class T>
__device__ __forceinline__ void store4(T* p, int64_t i, const Vec4<T>& r) {
  typename Vec4<T>::Word u;
  memcpy(&u, r.v, sizeof u);
  reinterpret_cast<typename Vec4<T>::Word*>(p)[i] = u;
}
template <class S, class D>
__global__ void cast4_kernel(const S* x, D* y, int64_t n4) {
  FR_CUDA_GRID_LOOP(i, n4) {
    const Vec4<S> a = load4(x, i);
    Vec4<D> b;
#pragma unroll
    for (int j = 0; j < 4; ++j) b.v[j] = from_f<D>(to_f(a.v[j]));
    store4(y, i, b);
  }
}

void launch_cast(void* ctx, const void* x, uint32_t xt, void* y, uint32_t yt, int64_t n, cudaStream_t s,
                 const char* op) {
  const int sms = ctx_of(ctx)->sm_count;
  with_float_type(xt, op, [&](auto src) {
    with_float_type(yt, op, [&](auto dst) {
      using S = decltype(src);
      using D = decltype(dst);
      const S* xs = static_cast<const S*>(x);
      D* yd = static_cast<D*>(y);
      if (n % 4 == 0 && aligned16({x, y}))
        cast4_kernel<S, D><<<grid_for(n / 4, 256, sms), 256, 0, s>>>(xs, yd, n / 4);
      else
        cast_kernel<S, D><<<grid_for(n, 256, sms), 256, 0, s>>>(xs, yd, n);
    });
  });
  FR_CUDA_LAUNCH_CHECK();
}
}  // namespace

FR_CUDA_KERNEL_RUN(cast) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "cast");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "cast: x and y sizes differ");
    launch_cast(ctx, call->in[0].data, call->in[0].dtype, call->out[0].data, call->out[0].dtype, n,
                stream_of(call), "cast");
  });
}

FR_CUDA_KERNEL_RUN(cast_range) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 1, 1, "cast_range");
    const FrRange &src = call->rin[0], &dst = call->rout[0];
    const int64_t n = sdk::cast_elements(src, dst, "cast_range");
    if (n == 0) return;
    launch_cast(ctx, src.data, src.dtype, dst.data, dst.dtype, n, stream_of(call), "cast_range");
  });
}

}  // namespace fresco::cuda
