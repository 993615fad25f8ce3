// CUDA dropout forward/backward: keep element i when Philox(seed, layer, step, i/4)[i%4] >= p, scale 1/(1-p).
// seed and step are read from the S-region scalars on the device, so a captured graph draws a new mask each
// step. Same draws as the CPU kernel, bit for bit. Test: tests/plugins/cuda.
#include "cuda_common.h"
#include "fresco/philox.h"

namespace fresco::cuda {

namespace {
__global__ void dropout_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float p,
                               uint32_t layer, const FrStepScalars* __restrict__ s) {
  const uint64_t seed = (static_cast<uint64_t>(s->seed_hi) << 32) | s->seed_lo;
  const uint32_t step = static_cast<uint32_t>(s->step);
  const float scale = 1.0f / (1.0f - p);
  const int64_t groups = (n + 3) / 4;
  FR_CUDA_GRID_LOOP(g, groups) {
    const FrPhilox4 r = fr_draw4(seed, FR_RNG_DROPOUT, layer, step, static_cast<uint64_t>(g));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = g * 4 + j;
      if (i < n) y[i] = fr_u01(r.v[j]) >= p ? x[i] * scale : 0.0f;
    }
  }
}

void launch(void* ctx, const FrCall* call, const char* name) {
  sdk::expect_arity(call, 1, 1, 1, 0, name);
  const auto& p = sdk::params<FrDropoutParams>(call);
  FR_PLUGIN_CHECK(call->rin[0].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                  std::string(name) + ": step scalars range too small");
  const int64_t n = sdk::numel(call->in[0]);
  FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                  std::string(name) + ": sizes differ");
  dropout_kernel<<<grid_for((n + 3) / 4, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
      sdk::data<float>(call->in[0]), sdk::data<float>(call->out[0]), n, p.p, p.layer_id,
      static_cast<const FrStepScalars*>(call->rin[0].data));
  FR_CUDA_LAUNCH_CHECK();
}
}  // namespace

FR_CUDA_KERNEL_RUN(dropout) {
  return sdk::guard([&] { launch(ctx, call, "dropout"); });
}
FR_CUDA_KERNEL_RUN(dropout_backward) {
  return sdk::guard([&] { launch(ctx, call, "dropout_backward"); });
}

}  // namespace fresco::cuda
