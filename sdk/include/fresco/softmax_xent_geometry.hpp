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

// Workspace the loss kernels (softmax_xent, fc_softmax_xent) need for their rows: a loss and a hit per row
// of the first input.
inline uint64_t xent_workspace_bytes(const FrCall* call) {
  return static_cast<uint64_t>(rows(call->in[0])) * 2 * sizeof(float);
}

// The batch results range and the rows' workspace, checked the same way for both loss ops.
inline void check_xent_results(const FrCall* call, const char* op) {
  FR_PLUGIN_CHECK(call->rout[0].bytes >= sizeof(FrBatchResults), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": results range too small");
  FR_PLUGIN_CHECK(call->workspace_bytes >= xent_workspace_bytes(call), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": workspace too small");
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
  FR_PLUGIN_CHECK(!p.write_grad || numel(call->out[0]) == s.m * s.c, FR_ERR_INVALID_ARGUMENT,
                  "softmax_xent: the gradient output must have the logits' M x C values");
  check_xent_results(call, "softmax_xent");
  return s;
}

// fc_softmax_xent (ops.h): the shapes, dtypes and ranges every backend checks before running it.
struct FcXentShape {
  int64_t m, n, k;          // rows, classes, input features
  const FrStepScalars* ls;  // step scalars when the loss is scaled, else null
};

inline FcXentShape fc_xent_shape(const FrCall* call) {
  expect_arity(call, 3, 3, 0, 1, "fc_softmax_xent");
  const auto& p = params<FrFcSoftmaxXentParams>(call);
  const FrTensor &x = call->in[0], &w = call->in[1], &labels = call->in[2];
  const FcXentShape s{rows(x), rows(w), cols(x),
                      call->n_rin >= 1 ? step_scalars(call->rin[0], "fc_softmax_xent") : nullptr};
  FR_PLUGIN_CHECK(x.dtype == FR_F32 && w.dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
                  "fc_softmax_xent: x and w must be f32");
  FR_PLUGIN_CHECK(
      cols(w) == s.k, FR_ERR_INVALID_ARGUMENT,
      "fc_softmax_xent: w has " + std::to_string(cols(w)) + " inputs, x has " + std::to_string(s.k));
  FR_PLUGIN_CHECK(s.n >= 1 && s.n <= FR_FC_SOFTMAX_XENT_MAX_CLASSES, FR_ERR_INVALID_ARGUMENT,
                  "fc_softmax_xent: 1 to " + std::to_string(FR_FC_SOFTMAX_XENT_MAX_CLASSES) +
                      " classes, found " + std::to_string(s.n));
  FR_PLUGIN_CHECK(labels.dtype == FR_I32 && numel(labels) >= s.m, FR_ERR_INVALID_ARGUMENT,
                  "fc_softmax_xent: labels must be i32, one per row");
  FR_PLUGIN_CHECK(!p.has_bias || (call->n_in >= 4 && numel(call->in[3]) == s.n), FR_ERR_INVALID_ARGUMENT,
                  "fc_softmax_xent: has_bias but no bias of one value per class");
  for (uint32_t o = 0; o < 2; ++o)
    FR_PLUGIN_CHECK(rows(call->out[o]) == s.m && cols(call->out[o]) == s.n, FR_ERR_INVALID_ARGUMENT,
                    "fc_softmax_xent: logits and dlogits must be [M,N]");
  FR_PLUGIN_CHECK(numel(call->out[2]) == s.m * s.k, FR_ERR_INVALID_ARGUMENT,
                  "fc_softmax_xent: dx must be [M,K]");
  check_xent_results(call, "fc_softmax_xent");
  return s;
}

}  // namespace fresco::sdk
