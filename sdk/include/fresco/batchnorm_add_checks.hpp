// Checks of a batchnorm_add call (ops.h: a batchnorm computed by the residual join that reads it) shared by
// every backend, with messages that name the op. Header-only, C++17.
#pragma once

#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// Training params, {x, gamma, beta, r} -> {y, save_mean, save_invstd} with the running statistics as two
// range outputs, and r of x's size and dtype; the batchnorm's own checks follow in the shared forward.
inline void check_batchnorm_add(const FrCall* call) {
  FR_PLUGIN_CHECK(params<FrBatchNormParams>(call).training, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: training only (params.training = 1)");
  expect_arity(call, 4, 3, 0, 2, "batchnorm_add");
  const FrTensor &x = call->in[0], &r = call->in[3];
  FR_PLUGIN_CHECK(numel(r) == numel(x) && r.dtype == x.dtype, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: the residual r has " + std::to_string(numel(r)) + " elements, x " +
                      std::to_string(numel(x)) + " (or their dtypes differ)");
}

}  // namespace fresco::sdk
