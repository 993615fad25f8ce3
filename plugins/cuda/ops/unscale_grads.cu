// CUDA range op unscale_grads (dynamic loss scaling, ops.h): one kernel over the whole f32 gradient range
// multiplies by 1 / loss_scale (read from the step scalars on the device) and sets skip_step when any result
// is inf or NaN (every writer stores the same 1, so the flag is deterministic). Test: tests/plugins/cuda.
#include <cmath>

#include "cuda_common.h"

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
