// The momentum (Adam: beta1) of the step being taken from sgd_update's / adam_update's optional per-step
// table (ops.h, FR_KERNEL_STEP_MOMENTUM), read on the host; shared by the two CPU kernels.
#pragma once

#include <string>

#include "fresco/plugin.hpp"
#include "fresco/update_rules.h"

namespace fresco::cpu {

inline float step_momentum(const FrRange& table, int32_t step, const char* op) {
  const uint64_t n = table.bytes / sizeof(float);
  FR_PLUGIN_CHECK(n >= 1 && table.data, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": the per-step momentum table holds no value");
  return fr_step_value(static_cast<const float*>(table.data), static_cast<int64_t>(n), step);
}

}  // namespace fresco::cpu
