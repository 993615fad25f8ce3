// The checks every backend's softmax_xent kernel makes before running (ops.h): arity, i32 labels, at least
// one label per row, a gradient output when asked for, the results range, the workspace prepare() asked for
// (two floats per row), and the optional step scalars whose loss_scale multiplies the gradient. Header-only,
// C++17.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

struct XentShape {
  int64_t m, c;             // rows (samples) and classes
  const FrStepScalars* ls;  // step scalars when the loss is scaled (fp16), else null
};

// Workspace softmax_xent kernels ask for: a loss and a hit per row.
inline uint64_t xent_workspace_bytes(const FrCall* call) {
  return static_cast<uint64_t>(rows(call->in[0])) * 2 * sizeof(float);
}

inline XentShape xent_shape(const FrCall* call) {
  expect_arity(call, 2, 0, 0, 1, "softmax_xent");
  const auto& p = params<FrSoftmaxXentParams>(call);
  FR_PLUGIN_CHECK(call->in[1].dtype == FR_I32, FR_ERR_INVALID_ARGUMENT,
                  "softmax_xent: labels must be i32, found dtype " + std::to_string(call->in[1].dtype));
  const XentShape s{rows(call->in[0]), cols(call->in[0]),
                    call->n_rin >= 1 ? step_scalars(call->rin[0], "softmax_xent") : nullptr};
  FR_PLUGIN_CHECK(numel(call->in[1]) >= s.m, FR_ERR_INVALID_ARGUMENT, "softmax_xent: fewer labels than rows");
  FR_PLUGIN_CHECK(!p.write_grad || call->n_out >= 1, FR_ERR_INVALID_ARGUMENT,
                  "softmax_xent: no gradient output");
  FR_PLUGIN_CHECK(call->rout[0].bytes >= sizeof(FrBatchResults), FR_ERR_INVALID_ARGUMENT,
                  "softmax_xent: results range too small");
  FR_PLUGIN_CHECK(call->workspace_bytes >= xent_workspace_bytes(call), FR_ERR_INVALID_ARGUMENT,
                  "softmax_xent: workspace too small");
  return s;
}

}  // namespace fresco::sdk
