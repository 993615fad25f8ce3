// Checks of a lars_update call (ops.h), shared by every backend so the messages and rules are the same: the
// ranges (g, step scalars[, momentum table] in; w, momentum buffer out, one tensor's f32 elements each) and
// the params. Header-only, C++17.
#pragma once

#include <cmath>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// The call's params, once its ranges and params are checked; *elements = the tensor's element count.
inline const FrLarsParams& lars_checked(const FrCall* call, uint64_t* elements) {
  expect_arity(call, 0, 0, 2, 2, "lars_update");
  step_scalars(call->rin[1], "lars_update");  // checked for size
  const auto& p = params<FrLarsParams>(call);
  FR_PLUGIN_CHECK(std::isfinite(p.eta) && p.eta > 0.0f, FR_ERR_INVALID_ARGUMENT,
                  "lars_update: eta must be positive");
  const uint64_t n = count<float>(call->rout[0]);
  FR_PLUGIN_CHECK(count<float>(call->rin[0]) == n && count<float>(call->rout[1]) == n,
                  FR_ERR_INVALID_ARGUMENT, "lars_update: w/g/momentum buffer sizes differ");
  *elements = n;
  return p;
}

}  // namespace fresco::sdk
