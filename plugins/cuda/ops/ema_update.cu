// CUDA range op ema_update (ops.h): one kernel over the whole weight range, the shared rules fr_ema_action /
// fr_ema_step of fresco/update_rules.h, so the CPU and the GPU average alike; the step is read from S-region
// memory inside the kernel. A plain launch: it starts after the last update has finished, and step_done
// (launched after it as a programmatic dependent) starts only once it has exited. Test:
// tests/plugins/cuda/test_cuda_ema.cpp.
#include "fresco/ema_checks.hpp"
#include "fresco/update_rules.h"
#include "ops/dependent_launch.cuh"

namespace fresco::cuda {

namespace {
__global__ void ema_kernel(float* __restrict__ e, const float* __restrict__ w, int64_t n, FrEmaParams p,
                           const FrStepScalars* __restrict__ s) {
  const int action = fr_ema_action(s->step, p.every);
  if (action == 0) return;
  const float weight = p.weight;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    e[i] = action == 1 ? w[i] : fr_ema_step(e[i], w[i], weight);
}
}  // namespace

FR_CUDA_KERNEL_RUN(ema_update) {
  return sdk::guard([&] {
    uint64_t elements = 0;
    const FrEmaParams& p = sdk::ema_checked(call, &elements);
    const auto n = static_cast<int64_t>(elements);
    if (n == 0) return;
    const unsigned grid = grid_for(n, 256, ctx_of(ctx)->sm_count);
    ema_kernel<<<grid, 256, 0, stream_of(call)>>>(sdk::data<float>(call->rout[0]),
                                                  sdk::data<float>(call->rin[0]), n, p,
                                                  static_cast<const FrStepScalars*>(call->rin[1].data));
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
