// CPU range op lr_schedule: writes FrStepScalars.lr for the step about to be taken (index = step): constant,
// cosine with linear warm-up, or a table. step_done advances the step afterwards. Test: test_range_ops.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

float schedule_lr(const FrScheduleParams& p, int32_t step, const float* table) {
  switch (p.kind) {
    case FR_SCHED_TABLE:
      return p.table_len > 0 ? table[step < p.table_len ? step : p.table_len - 1] : p.base_lr;
    case FR_SCHED_COSINE: {
      if (step < p.warmup_steps)
        return p.base_lr * static_cast<float>(step + 1) / static_cast<float>(p.warmup_steps);
      const int32_t span = p.total_steps - p.warmup_steps;
      const double t = span > 0 ? static_cast<double>(std::min(step - p.warmup_steps, span)) / span : 1.0;
      return static_cast<float>(p.min_lr + (p.base_lr - p.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t)));
    }
    default:
      if (step < p.warmup_steps)
        return p.base_lr * static_cast<float>(step + 1) / static_cast<float>(p.warmup_steps);
      return p.base_lr;
  }
}

FR_CPU_KERNEL_RUN(lr_schedule) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "lr_schedule");
    const auto& p = sdk::params<FrScheduleParams>(call);
    auto* s = static_cast<FrStepScalars*>(call->rout[0].data);
    const float* table = nullptr;
    if (p.kind == FR_SCHED_TABLE) {
      FR_PLUGIN_CHECK(
          call->n_rin >= 1 && call->rin[0].bytes >= static_cast<uint64_t>(p.table_len) * sizeof(float),
          FR_ERR_INVALID_ARGUMENT, "lr_schedule: table range too small");
      table = static_cast<const float*>(call->rin[0].data);
    }
    s->lr = schedule_lr(p, s->step, table);
  });
}

FR_CPU_KERNEL_RUN(step_done) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "step_done");
    static_cast<FrStepScalars*>(call->rout[0].data)->step += 1;
  });
}

}  // namespace fresco::cpu
