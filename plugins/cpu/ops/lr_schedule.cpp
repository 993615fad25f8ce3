// CPU range op lr_schedule: writes FrStepScalars.lr for the step about to be taken (index = step): constant,
// cosine with linear warm-up, or a table. step_done advances the step afterwards. Test: test_range_ops.cpp.
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
    s->step += 1;
    if (call->params_size == 0) return;  // plain counter
    const auto& p = sdk::params<FrScheduleParams>(call);
    const float* table = sdk::schedule_table(call, p, "step_done");
    s->lr = fr_schedule_lr(&p, s->step, table);  // the lr of the step about to be taken next
  });
}

}  // namespace fresco::cpu
