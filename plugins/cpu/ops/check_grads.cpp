// CPU range op check_grads (dynamic loss scaling, ops.h): skip_step is set when any float(g) * (1 /
// loss_scale) of the f32, f16 or bf16 gradients rin[0] is inf or NaN, the test unscale_grads makes, with
// nothing stored (CompileOptions::update_from_grads16: the updates read the 16-bit gradients themselves).
// Test: test_grads16.cpp.
#include <atomic>
#include <cmath>

#include "cpu_common.h"
#include "ops/float_convert.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(check_grads) {
  return sdk::guard([&] {
    int64_t n = 0;
    FrStepScalars* s = sdk::check_grads_operands(call, &n);
    const FrRange& g = call->rin[0];
    const float inv = 1.0f / s->loss_scale;
    std::atomic<bool> bad{false};
    parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t e) {
      bool local = false;
      for (int64_t i = a; i < e; ++i) local |= !std::isfinite(load_float(g.data, g.dtype, i) * inv);
      if (local) bad.store(true, std::memory_order_relaxed);
    });
    if (bad.load()) s->skip_step = 1;
  });
}

}  // namespace fresco::cpu
