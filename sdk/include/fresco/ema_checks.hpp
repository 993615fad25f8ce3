// Checks of an ema_update call (ops.h), shared by every backend so the messages and rules are the same: the
// ranges (W and the step scalars in, E out, one tensor's f32 elements each) and the params. Header-only,
// C++17.
#pragma once

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// The call's params, once its ranges and params are checked; *elements = the tensor's element count.
inline const FrEmaParams& ema_checked(const FrCall* call, uint64_t* elements) {
  expect_arity(call, 0, 0, 2, 1, "ema_update");
  step_scalars(call->rin[1], "ema_update");  // checked for size
  const auto& p = params<FrEmaParams>(call);
  FR_PLUGIN_CHECK(p.weight > 0.0f && p.weight <= 1.0f && p.every >= 1, FR_ERR_INVALID_ARGUMENT,
                  "ema_update: need 0 < weight <= 1 and every >= 1");
  const uint64_t n = count<float>(call->rout[0]);
  FR_PLUGIN_CHECK(count<float>(call->rin[0]) == n, FR_ERR_INVALID_ARGUMENT,
                  "ema_update: E and W sizes differ");
  *elements = n;
  return p;
}

}  // namespace fresco::sdk
