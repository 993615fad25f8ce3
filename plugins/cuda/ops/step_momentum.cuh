// The optional per-step momentum table of sgd_update, adam_update and lars_update (ops.h,
// FR_KERNEL_STEP_MOMENTUM) on the CUDA backend: taken from the call on the host, read by the kernels at the
// step they take. Shared by ops/optimizers.cu and ops/lars_update.cu.
#pragma once

#include <string>

#include "cuda_common.h"
#include "fresco/update_rules.h"

namespace fresco::cuda {

// The table's values and their count (0: none).
struct MomentumTable {
  const float* values;
  int64_t len;
  // The momentum (Adam: beta1) of step `step`, or `fixed` without a table.
  __device__ __forceinline__ float at(int32_t step, float fixed) const {
    return len > 0 ? fr_step_value(values, len, step) : fixed;
  }
};

// The call's third range input (checked), or no table.
inline MomentumTable momentum_table(const FrCall* call, const char* op) {
  if (call->n_rin < 3) return {nullptr, 0};
  const int64_t len = static_cast<int64_t>(call->rin[2].bytes / sizeof(float));
  FR_PLUGIN_CHECK(len >= 1 && call->rin[2].data, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": the per-step momentum table holds no value");
  return {static_cast<const float*>(call->rin[2].data), len};
}

}  // namespace fresco::cuda
