// CUDA range op check_grads (dynamic loss scaling, ops.h): one kernel over the gradients (f32, f16 or bf16)
// sets skip_step when any float(g) * (1 / loss_scale) is inf or NaN (loss_scale from the step scalars on the
// device), the test unscale_grads makes, storing nothing else (every writer stores the same 1, so the flag is
// deterministic). fp16's check of the 16-bit gradients that the updates read themselves
// (CompileOptions::update_from_grads16). Test: tests/plugins/cuda (vs the CPU kernel).
#include <cmath>
#include <cstring>

#include "cuda_common.h"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
// Four values per thread when kVec (g 8-byte aligned for 16-bit types, 16-byte for f32; n counted in fours),
// else one.
template <class S, bool kVec>
__global__ void check_grads_kernel(const S* g, int64_t n, FrStepScalars* s) {
  const float inv = 1.0f / s->loss_scale;
  bool bad = false;
  FR_CUDA_GRID_LOOP(i, n) {
    if constexpr (kVec) {
      S v[4];
      if constexpr (sizeof(S) == 2) {
        const uint2 u = reinterpret_cast<const uint2*>(g)[i];
        memcpy(v, &u, sizeof u);
      } else {
        const float4 u = reinterpret_cast<const float4*>(g)[i];
        memcpy(v, &u, sizeof u);
      }
      for (int j = 0; j < 4; ++j) bad |= !isfinite(to_f(v[j]) * inv);
    } else {
      bad |= !isfinite(to_f(g[i]) * inv);
    }
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) s->skip_step = 1;
}

template <class S>
void launch_check(const void* data, int64_t n, FrStepScalars* s, int sms, cudaStream_t st) {
  if (n == 0) return;
  const S* g = static_cast<const S*>(data);
  if (n % 4 == 0 && reinterpret_cast<uintptr_t>(data) % (4 * sizeof(S)) == 0)
    check_grads_kernel<S, true><<<grid_for(n / 4, 256, sms), 256, 0, st>>>(g, n / 4, s);
  else
    check_grads_kernel<S, false><<<grid_for(n, 256, sms), 256, 0, st>>>(g, n, s);
}
}  // namespace

FR_CUDA_KERNEL_RUN(check_grads) {
  return sdk::guard([&] {
    int64_t n = 0;
    FrStepScalars* scalars = sdk::check_grads_operands(call, &n);
    const FrRange& g = call->rin[0];
    const int sms = ctx_of(ctx)->sm_count;
    with_float_type(g.dtype, "check_grads",
                    [&](auto tag) { launch_check<decltype(tag)>(g.data, n, scalars, sms, stream_of(call)); });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
