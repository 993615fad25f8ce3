// CUDA range op unscale_grads (dynamic loss scaling, ops.h): one kernel over the whole f32 gradient range
// multiplies by 1 / loss_scale (read from the step scalars on the device) and sets skip_step when any result
// is inf or NaN (every writer stores the same 1, so the flag is deterministic). Test: tests/plugins/cuda.
#include <cmath>

#include "cuda_common.h"

namespace fresco::cuda {

namespace {
__global__ void unscale_kernel(float* g, int64_t n, FrStepScalars* s) {
  const float inv = 1.0f / s->loss_scale;
  bool bad = false;
  FR_CUDA_GRID_LOOP(i, n) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) s->skip_step = 1;
}

// Four values per thread as one float4 (g 16-byte aligned, n4 = n / 4): the same products and flag.
__global__ void unscale4_kernel(float4* g, int64_t n4, FrStepScalars* s) {
  const float inv = 1.0f / s->loss_scale;
  bool bad = false;
  FR_CUDA_GRID_LOOP(i, n4) {
    float4 v = g[i];
    v.x *= inv, v.y *= inv, v.z *= inv, v.w *= inv;
    g[i] = v;
    bad |= !(isfinite(v.x) && isfinite(v.y) && isfinite(v.z) && isfinite(v.w));
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
      unscale4_kernel<<<grid_for(n / 4, 256, sms), 256, 0, stream_of(call)>>>(static_cast<float4*>(g.data),
                                                                              n / 4, scalars);
    else
      unscale_kernel<<<grid_for(n, 256, sms), 256, 0, stream_of(call)>>>(static_cast<float*>(g.data), n,
                                                                         scalars);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
