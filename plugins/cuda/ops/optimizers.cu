// CUDA optimizer range ops: ONE kernel over a whole region range (every FC weight, or every no-decay tensor)
// using the shared rules of fresco/update_rules.h, so CPU and GPU compute the same numbers. lr, step and
// skip_step are read from S-region memory inside the kernel. Test: tests/plugins/cuda (vs the CPU kernels).
#include "cuda_common.h"
#include "fresco/update_rules.h"

namespace fresco::cuda {

namespace {
__global__ void sgd_kernel(float* __restrict__ w, float* __restrict__ buf, const float* __restrict__ g,
                           int64_t n, FrSgdParams p, const FrStepScalars* __restrict__ s) {
  if (s->skip_step) return;
  const float lr = s->lr;
  FR_CUDA_GRID_LOOP(i, n)
  fr_sgd_step(w + i, buf ? buf + i : nullptr, g[i], lr, p.weight_decay, p.momentum, p.nesterov);
}

__global__ void adam_kernel(float* __restrict__ w, float* __restrict__ m, float* __restrict__ v,
                            const float* __restrict__ g, int64_t n, FrAdamParams p,
                            const FrStepScalars* __restrict__ s) {
  if (s->skip_step) return;
  const FrAdamStepConsts k = fr_adam_consts(&p, s->lr, s->step);
  FR_CUDA_GRID_LOOP(i, n)
  fr_adam_step(w + i, m + i, v + i, g[i], &p, k);
}
}  // namespace

FR_CUDA_KERNEL_RUN(sgd_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 1, "sgd_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "sgd_update: step scalars range too small");
    const auto& p = sdk::params<FrSgdParams>(call);
    const int64_t n = static_cast<int64_t>(sdk::count<float>(call->rout[0]));
    FR_PLUGIN_CHECK(static_cast<int64_t>(sdk::count<float>(call->rin[0])) == n, FR_ERR_INVALID_ARGUMENT,
                    "sgd_update: w/g sizes differ");
    const bool has_buf = p.momentum != 0.0f;
    FR_PLUGIN_CHECK(
        !has_buf || (call->n_rout >= 2 && static_cast<int64_t>(sdk::count<float>(call->rout[1])) == n),
        FR_ERR_INVALID_ARGUMENT, "sgd_update: momentum buffer missing or of another size");
    sgd_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->rout[0]), has_buf ? sdk::data<float>(call->rout[1]) : nullptr,
        sdk::data<float>(call->rin[0]), n, p, static_cast<const FrStepScalars*>(call->rin[1].data));
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(adam_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 3, "adam_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "adam_update: step scalars range too small");
    const auto& p = sdk::params<FrAdamParams>(call);
    const int64_t n = static_cast<int64_t>(sdk::count<float>(call->rout[0]));
    FR_PLUGIN_CHECK(static_cast<int64_t>(sdk::count<float>(call->rin[0])) == n &&
                        static_cast<int64_t>(sdk::count<float>(call->rout[1])) == n &&
                        static_cast<int64_t>(sdk::count<float>(call->rout[2])) == n,
                    FR_ERR_INVALID_ARGUMENT, "adam_update: w/g/m/v ranges differ in size");
    adam_kernel<<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->rout[0]), sdk::data<float>(call->rout[1]), sdk::data<float>(call->rout[2]),
        sdk::data<float>(call->rin[0]), n, p, static_cast<const FrStepScalars*>(call->rin[1].data));
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
