// Checks of a batchnorm_add call (ops.h: a batchnorm computed by the residual join that reads it) shared by
// every backend, with messages that name the op. Header-only, C++17.
#pragma once

#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// Training params, {x, gamma, beta, r} -> {y, save_mean, save_invstd} with the running statistics as two
// range outputs, and r of x's size and dtype; the batchnorm's own checks follow in the shared forward. A
// fourth output, the subsampled y2 (ops.h), must be [N, (H + 1) / 2, (W + 1) / 2, C] of x's [N, H, W, C] and
// dtype: returned, else null.
inline const FrTensor* check_batchnorm_add(const FrCall* call) {
  FR_PLUGIN_CHECK(params<FrBatchNormParams>(call).training, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: training only (params.training = 1)");
  expect_arity(call, 4, 3, 0, 2, "batchnorm_add");
  const FrTensor &x = call->in[0], &r = call->in[3];
  FR_PLUGIN_CHECK(numel(r) == numel(x) && r.dtype == x.dtype, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: the residual r has " + std::to_string(numel(r)) + " elements, x " +
                      std::to_string(numel(x)) + " (or their dtypes differ)");
  FR_PLUGIN_CHECK(call->n_out <= 4, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: at most four outputs {y, save_mean, save_invstd, y2}, got " +
                      std::to_string(call->n_out));
  if (call->n_out < 4) return nullptr;
  const FrTensor &y = call->out[0], &y2 = call->out[3];
  FR_PLUGIN_CHECK(x.ndim == 4 && y.ndim == 4 && y.dims[0] == x.dims[0] && y.dims[1] == x.dims[1] &&
                      y.dims[2] == x.dims[2] && y.dims[3] == x.dims[3],
                  FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: with a subsampled output y must be 4-d with x's shape");
  FR_PLUGIN_CHECK(x.ndim == 4 && y2.ndim == 4 && y2.dims[0] == x.dims[0] &&
                      y2.dims[1] == (x.dims[1] + 1) / 2 && y2.dims[2] == (x.dims[2] + 1) / 2 &&
                      y2.dims[3] == x.dims[3] && y2.dtype == x.dtype,
                  FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: the subsampled output must be x's even rows and columns, [" +
                      std::to_string(x.dims[0]) + "," + std::to_string((x.dims[1] + 1) / 2) + "," +
                      std::to_string((x.dims[2] + 1) / 2) + "," + std::to_string(x.dims[3]) +
                      "] in x's dtype, for 4-d x");
  return &y2;
}

// The call without its subsampled output (the three outputs the batchnorm forward checks), for a backend
// that writes y2 itself.
inline FrCall without_subsample(const FrCall* call) {
  FrCall c = *call;
  if (c.n_out == 4) c.n_out = 3;
  return c;
}

}  // namespace fresco::sdk
