// CPU dropout: keep element i with probability 1-p, scaled by 1/(1-p); the mask is Philox(seed, layer, step,
// i) from the S-region scalars, so backward recomputes it. Test: tests/plugins/cpu/test_dropout.cpp.
#include "cpu_common.h"
#include "fresco/philox.h"

namespace fresco::cpu {

namespace {
void apply_mask(const FrCall* call, const char* name) {
  sdk::expect_arity(call, 1, 1, 1, 0, name);
  const auto& p = sdk::params<FrDropoutParams>(call);
  FR_PLUGIN_CHECK(call->rin[0].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                  std::string(name) + ": step scalars range too small");
  const auto* s = static_cast<const FrStepScalars*>(call->rin[0].data);
  const uint64_t seed = (static_cast<uint64_t>(s->seed_hi) << 32) | s->seed_lo;
  const uint32_t step = static_cast<uint32_t>(s->step);
  const float* x = sdk::data<float>(call->in[0]);
  float* y = sdk::data<float>(call->out[0]);
  const int64_t n = sdk::numel(call->in[0]);
  FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                  std::string(name) + ": sizes differ");
  const float scale = p.p < 1.0f ? 1.0f / (1.0f - p.p) : 0.0f;
  parallel_chunks((n + 3) / 4, 1 << 12, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const FrPhilox4 r = fr_draw4(seed, FR_RNG_DROPOUT, p.layer_id, step, static_cast<uint64_t>(g));
      for (int64_t j = 0; j < 4 && g * 4 + j < n; ++j) {
        const int64_t i = g * 4 + j;
        y[i] = fr_u01(r.v[j]) >= p.p ? x[i] * scale : 0.0f;
      }
    }
  });
}
}  // namespace

FR_CPU_KERNEL_RUN(dropout) {
  return sdk::guard([&] { apply_mask(call, "dropout"); });
}
FR_CPU_KERNEL_RUN(dropout_backward) {
  return sdk::guard([&] { apply_mask(call, "dropout_backward"); });
}

}  // namespace fresco::cpu
