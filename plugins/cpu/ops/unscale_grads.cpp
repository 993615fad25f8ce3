// CPU range op unscale_grads (dynamic loss scaling, ops.h): every f32 gradient of rout[0] is multiplied by
// 1 / loss_scale (after a cast from the f16 / bf16 source rin[0], when there is one), and skip_step is set
// when any of them is inf or NaN. Test: test_range_ops.cpp.
#include <atomic>
#include <cmath>

#include "cpu_common.h"
#include "ops/float_convert.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(unscale_grads) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 2, "unscale_grads");
    const FrRange& g = call->rout[0];
    FR_PLUGIN_CHECK(g.dtype == FR_F32 && g.bytes % sizeof(float) == 0, FR_ERR_INVALID_ARGUMENT,
                    "unscale_grads: the gradients must be an f32 range");
    FrStepScalars* s = sdk::step_scalars(call->rout[1], "unscale_grads");
    const float inv = 1.0f / s->loss_scale;
    float* v = static_cast<float*>(g.data);
    const FrRange* src = call->n_rin > 0 ? &call->rin[0] : nullptr;
    const int64_t n =
        src ? sdk::cast_elements(*src, g, "unscale_grads") : static_cast<int64_t>(g.bytes / sizeof(float));
    FR_PLUGIN_CHECK(!src || src->dtype == FR_F16 || src->dtype == FR_BF16, FR_ERR_INVALID_ARGUMENT,
                    "unscale_grads: the source to cast must be f16 or bf16");
    std::atomic<bool> bad{false};
    parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
      bool local = false;
      for (int64_t i = a; i < b; ++i) {
        v[i] = (src ? load_float(src->data, src->dtype, i) : v[i]) * inv;
        local |= !std::isfinite(v[i]);
      }
      if (local) bad.store(true, std::memory_order_relaxed);
    });
    if (bad.load()) s->skip_step = 1;
  });
}

}  // namespace fresco::cpu
