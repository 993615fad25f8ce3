// CPU range op lr_schedule: writes FrStepScalars.lr for the step about to be taken (index = step): constant,
// cosine with linear warm-up, or a table. step_done advances the step afterwards. Test: test_range_ops.cpp.
#include "cpu_common.h"
#include "fresco/update_rules.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(lr_schedule) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "lr_schedule");
    FR_PLUGIN_CHECK(call->rout[0].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "lr_schedule: step scalars range too small");
    const auto& p = sdk::params<FrScheduleParams>(call);
    auto* s = static_cast<FrStepScalars*>(call->rout[0].data);
    const float* table = nullptr;
    if (p.kind == FR_SCHED_TABLE) {
      FR_PLUGIN_CHECK(
          call->n_rin >= 1 && call->rin[0].bytes >= static_cast<uint64_t>(p.table_len) * sizeof(float),
          FR_ERR_INVALID_ARGUMENT, "lr_schedule: table range too small");
      table = static_cast<const float*>(call->rin[0].data);
    }
    s->lr = fr_schedule_lr(&p, s->step, table);
  });
}

FR_CPU_KERNEL_RUN(step_done) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "step_done");
    FR_PLUGIN_CHECK(call->rout[0].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "step_done: step scalars range too small");
    auto* s = static_cast<FrStepScalars*>(call->rout[0].data);
    s->step += 1;
    if (call->params_size == 0) return;  // plain counter
    const auto& p = sdk::params<FrScheduleParams>(call);
    const float* table = nullptr;
    if (p.kind == FR_SCHED_TABLE) {
      FR_PLUGIN_CHECK(
          call->n_rin >= 1 && call->rin[0].bytes >= static_cast<uint64_t>(p.table_len) * sizeof(float),
          FR_ERR_INVALID_ARGUMENT, "step_done: table range too small");
      table = static_cast<const float*>(call->rin[0].data);
    }
    s->lr = fr_schedule_lr(&p, s->step, table);  // the lr of the step about to be taken next
  });
}

}  // namespace fresco::cpu
