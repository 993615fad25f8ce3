// CUDA range ops on a few scalars, one thread each: accumulate_metrics (batch results into the pass
// accumulators), lr_schedule (the shared fr_schedule_lr rule, reading the step from S-region memory) and
// step_done (which also clears skip_step; launched as a programmatic dependent of the update before it) and
// loss_scale_update (fr_loss_scale_update). Test:
// tests/plugins/cuda.
#include "fresco/update_rules.h"
#include "ops/dependent_launch.cuh"

namespace fresco::cuda {

namespace {
__global__ void accumulate_kernel(const FrBatchResults* b, FrMetricAccumulators* a) {
  a->loss_sum += static_cast<double>(b->loss) * b->samples;
  a->correct += b->correct;
  a->samples += b->samples;
  a->batches += 1.0;
}
__global__ void lr_schedule_kernel(FrScheduleParams p, const float* table, FrStepScalars* s) {
  s->lr = fr_schedule_lr(&p, s->step, table);
}
// A programmatic dependent of the step's last update (ops/dependent_launch.cuh): the next lr is computed
// while the update still runs (the step counter is written only here, by the previous step's step_done), the
// scalars the updates read are written after it.
__global__ void step_done_kernel(FrStepScalars* s, FrScheduleParams p, const float* table,
                                 int with_schedule) {
  FrStepScalars t{};
  t.step = s->step;
  const float lr = with_schedule ? fr_schedule_lr(&p, t.step + 1, table) : 0.0f;
  wait_for_prior_kernels();
  t.updates = __ldcg(&s->updates);
  t.skip_step = __ldcg(&s->skip_step);
  fr_step_done(&t);
  s->step = t.step;
  s->updates = t.updates;
  s->skip_step = t.skip_step;
  if (with_schedule) s->lr = lr;
}
__global__ void loss_scale_update_kernel(FrStepScalars* s, FrLossScaleParams p) {
  fr_loss_scale_update(s, &p);
}
}  // namespace

bool device_code_has_dependent_launch() {
  cudaFuncAttributes a{};
  return cudaFuncGetAttributes(&a, step_done_kernel) == cudaSuccess && a.ptxVersion >= 90;
}

FR_CUDA_KERNEL_RUN(loss_scale_update) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 0, 0, 0, 1, "loss_scale_update");
    const auto& p = sdk::params<FrLossScaleParams>(call);
    FR_PLUGIN_CHECK(p.growth >= 1.0f && p.backoff > 0.0f && p.backoff <= 1.0f && p.growth_interval >= 1,
                    FR_ERR_INVALID_ARGUMENT,
                    "loss_scale_update: need growth >= 1, 0 < backoff <= 1, interval >= 1");
    loss_scale_update_kernel<<<1, 1, 0, stream_of(call)>>>(
        sdk::step_scalars(call->rout[0], "loss_scale_update"), p);
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(accumulate_metrics) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 0, 0, 1, 1, "accumulate_metrics");
    FR_PLUGIN_CHECK(
        call->rin[0].bytes >= sizeof(FrBatchResults) && call->rout[0].bytes >= sizeof(FrMetricAccumulators),
        FR_ERR_INVALID_ARGUMENT, "accumulate_metrics: ranges too small");
    accumulate_kernel<<<1, 1, 0, stream_of(call)>>>(static_cast<const FrBatchResults*>(call->rin[0].data),
                                                    static_cast<FrMetricAccumulators*>(call->rout[0].data));
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(lr_schedule) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 0, 0, 0, 1, "lr_schedule");
    FrStepScalars* scalars = sdk::step_scalars(call->rout[0], "lr_schedule");
    const auto& p = sdk::params<FrScheduleParams>(call);
    const float* table = sdk::schedule_table(call, p, "lr_schedule");
    lr_schedule_kernel<<<1, 1, 0, stream_of(call)>>>(p, table, scalars);
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(step_done) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "step_done");
    FrStepScalars* scalars = sdk::step_scalars(call->rout[0], "step_done");
    FrScheduleParams p{};
    const float* table = nullptr;
    const int with_schedule = call->params_size != 0;
    if (with_schedule) {
      p = sdk::params<FrScheduleParams>(call);
      table = sdk::schedule_table(call, p, "step_done");
    }
    launch_after_prior(ctx_of(ctx), step_done_kernel, 1, 1, stream_of(call), scalars, p, table,
                       with_schedule);
  });
}

}  // namespace fresco::cuda
