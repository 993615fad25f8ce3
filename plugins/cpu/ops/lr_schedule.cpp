// CPU range op lr_schedule: writes FrStepScalars.lr for the step about to be taken (index = step): constant,
// cosine with linear warm-up, or a table. step_done advances the step afterwards (and clears skip_step);
// loss_scale_update moves the dynamic loss scale (fr_loss_scale_update). Test: test_range_ops.cpp.
#include "cpu_common.h"
#include "fresco/update_rules.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(lr_schedule) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "lr_schedule");
    const auto& p = sdk::params<FrScheduleParams>(call);
    FrStepScalars* s = sdk::step_scalars(call->rout[0], "lr_schedule");
    const float* table = sdk::schedule_table(call, p, "lr_schedule");
    s->lr = fr_schedule_lr(&p, s->step, table);
  });
}

FR_CPU_KERNEL_RUN(step_done) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "step_done");
    FrStepScalars* s = sdk::step_scalars(call->rout[0], "step_done");
    fr_step_done(s);
    if (call->params_size == 0) return;  // plain counter
    const auto& p = sdk::params<FrScheduleParams>(call);
    const float* table = sdk::schedule_table(call, p, "step_done");
    s->lr = fr_schedule_lr(&p, s->step, table);  // the lr of the step about to be taken next
  });
}

FR_CPU_KERNEL_RUN(loss_scale_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "loss_scale_update");
    const auto& p = sdk::params<FrLossScaleParams>(call);
    FR_PLUGIN_CHECK(p.growth >= 1.0f && p.backoff > 0.0f && p.backoff <= 1.0f && p.growth_interval >= 1,
                    FR_ERR_INVALID_ARGUMENT,
                    "loss_scale_update: need growth >= 1, 0 < backoff <= 1, interval >= 1");
    fr_loss_scale_update(sdk::step_scalars(call->rout[0], "loss_scale_update"), &p);
  });
}

}  // namespace fresco::cpu
