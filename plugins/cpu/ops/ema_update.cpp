// CPU range op ema_update (ops.h): E = W after the first averaged step, then E = lerp(E, W, weight) after
// every `every`-th step (fr_ema_step, fr_ema_action). Test: test_optimizers.cpp.
#include "cpu_common.h"
#include "fresco/ema_checks.hpp"
#include "fresco/update_rules.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(ema_update) {
  return sdk::guard([&] {
    uint64_t n = 0;
    const FrEmaParams& p = sdk::ema_checked(call, &n);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    const int action = fr_ema_action(s->step, p.every);
    if (action == 0) return;
    float* e = sdk::data<float>(call->rout[0]);
    const float* w = sdk::data<float>(call->rin[0]);
    const float weight = p.weight;
    parallel_chunks(static_cast<int64_t>(n), 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) e[i] = action == 1 ? w[i] : fr_ema_step(e[i], w[i], weight);
    });
  });
}

}  // namespace fresco::cpu
