// CPU range op accumulate_metrics: adds one batch's FrBatchResults into FrMetricAccumulators (double).
// Test: tests/plugins/cpu/test_range_ops.cpp.
#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(accumulate_metrics) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 1, 1, "accumulate_metrics");
    FR_PLUGIN_CHECK(
        call->rin[0].bytes >= sizeof(FrBatchResults) && call->rout[0].bytes >= sizeof(FrMetricAccumulators),
        FR_ERR_INVALID_ARGUMENT, "accumulate_metrics: ranges too small");
    const auto* b = static_cast<const FrBatchResults*>(call->rin[0].data);
    auto* a = static_cast<FrMetricAccumulators*>(call->rout[0].data);
    a->loss_sum += static_cast<double>(b->loss) * b->samples;
    a->correct += b->correct;
    a->samples += b->samples;
    a->batches += 1.0;
  });
}

}  // namespace fresco::cpu
