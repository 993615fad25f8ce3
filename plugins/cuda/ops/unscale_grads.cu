// CUDA range op unscale_grads (dynamic loss scaling, ops.h): one kernel over the whole f32 gradient range
// multiplies by 1 / loss_scale (read from the step scalars on the device) and sets skip_step when any result
// is inf or NaN (every writer stores the same 1, so the flag is deterministic); with a 16-bit source it
// casts in the same pass (fp16's G16 -> G). Test: tests/plugins/cuda.
#include <cmath>

#include "cuda_common.h"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
__device__ __forceinline__ float scaled(float v, float k) {
  return v * k;
}
__device__ __forceinline__ float4 scaled(float4 v, float k) {
  return make_float4(v.x * k, v.y * k, v.z * k, v.w * k);
}
__device__ __forceinline__ bool finite(float v) {
  return isfinite(v);
}
__device__ __forceinline__ bool finite(float4 v) {
  return isfinite(v.x) && isfinite(v.y) && isfinite(v.z) && isfinite(v.w);
}

// V = float, or float4 (four values per thread; g 16-byte aligned, n counted in float4): the same products
// and flag either way.
template <class V>
__global__ void unscale_kernel(V* g, int64_t n, FrStepScalars* s) {
  const float inv = 1.0f / s->loss_scale;
  bool bad = false;
  FR_CUDA_GRID_LOOP(i, n) {
    const V v = scaled(g[i], inv);
    g[i] = v;
    bad |= !finite(v);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) s->skip_step = 1;
}

// g = float(src) * (1 / loss_scale), four values per thread when kVec (src 8-byte, g 16-byte aligned; n
// counted in fours), else one.
template <class S, bool kVec>
__global__ void unscale_cast_kernel(const S* src, float* g, int64_t n, FrStepScalars* s) {
  const float inv = 1.0f / s->loss_scale;
  bool bad = false;
  FR_CUDA_GRID_LOOP(i, n) {
    if constexpr (kVec) {
      const uint2 u = reinterpret_cast<const uint2*>(src)[i];
      S v[4];
      memcpy(v, &u, sizeof u);
      const float4 r = make_float4(to_f(v[0]) * inv, to_f(v[1]) * inv, to_f(v[2]) * inv, to_f(v[3]) * inv);
      reinterpret_cast<float4*>(g)[i] = r;
      bad |= !finite(r);
    } else {
      const float r = to_f(src[i]) * inv;
      g[i] = r;
      bad |= !finite(r);
    }
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) s->skip_step = 1;
}

void launch_unscale_cast(const FrRange& src, const FrRange& g, FrStepScalars* scalars, int sms,
                         cudaStream_t st) {
  const int64_t n = sdk::cast_elements(src, g, "unscale_grads");
  with_half_type(src.dtype, "unscale_grads (the source to cast)", [&](auto tag) {
    using S = decltype(tag);
    const S* x = static_cast<const S*>(src.data);
    float* y = static_cast<float*>(g.data);
    if (n == 0) return;
    if (n % 4 == 0 && aligned16({g.data}) && reinterpret_cast<uintptr_t>(src.data) % 8 == 0)
      unscale_cast_kernel<S, true><<<grid_for(n / 4, 256, sms), 256, 0, st>>>(x, y, n / 4, scalars);
    else
      unscale_cast_kernel<S, false><<<grid_for(n, 256, sms), 256, 0, st>>>(x, y, n, scalars);
  });
}
}  // namespace

FR_CUDA_KERNEL_RUN(unscale_grads) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 2, "unscale_grads");
    const FrRange& g = call->rout[0];
    FR_PLUGIN_CHECK(g.dtype == FR_F32 && g.bytes % sizeof(float) == 0, FR_ERR_INVALID_ARGUMENT,
                    "unscale_grads: the gradients must be an f32 range");
    const auto n = static_cast<int64_t>(g.bytes / sizeof(float));
    FrStepScalars* scalars = sdk::step_scalars(call->rout[1], "unscale_grads");
    const int sms = ctx_of(ctx)->sm_count;
    if (call->n_rin > 0) {  // the cast form
      launch_unscale_cast(call->rin[0], g, scalars, sms, stream_of(call));
      FR_CUDA_LAUNCH_CHECK();
      return;
    }
    if (n % 4 == 0 && aligned16({g.data}))
      unscale_kernel<float4><<<grid_for(n / 4, 256, sms), 256, 0, stream_of(call)>>>(
          static_cast<float4*>(g.data), n / 4, scalars);
    else
      unscale_kernel<float>
          <<<grid_for(n, 256, sms), 256, 0, stream_of(call)>>>(static_cast<float*>(g.data), n, scalars);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
