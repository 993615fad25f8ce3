// Checks of the gradient-sums operands (ops.h, "Gradient sums"): relu_backward's and add_relu_backward's
// optional x / save_mean inputs and gsums output, and batchnorm_backward's optional gsums input, shared by
// every backend so the messages and rules are the same. Header-only, C++17.
#pragma once

#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// The gradient-sums operands of a masked-gradient call (relu_backward: the first x at in[2];
// add_relu_backward: at in[3]), checked against its output dx: one or two (x, save_mean) input pairs, one
// gsums output per pair (out[1], out[2]); each x has dx's size and dtype, save_mean is f32 [C], gsums f32
// [2C].
constexpr int kMaxGradSumsTargets = 2;
struct GradSumsOperands {
  int targets = 0;  // 0: the plain form (data pointers are null during prepare)
  const void* x[kMaxGradSumsTargets] = {};
  const float* mean[kMaxGradSumsTargets] = {};
  float* sums[kMaxGradSumsTargets] = {};
  int64_t rows = 0, c = 0;
};

inline GradSumsOperands grad_sums_operands(const FrCall* call, uint32_t x_at, const char* op) {
  GradSumsOperands g;
  g.targets = static_cast<int>(call->n_out) - 1;
  FR_PLUGIN_CHECK(g.targets >= 0 && g.targets <= kMaxGradSumsTargets, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": at most " + std::to_string(kMaxGradSumsTargets + 1) +
                      " outputs (dx and a gsums per batchnorm), got " + std::to_string(call->n_out));
  FR_PLUGIN_CHECK(call->n_in == x_at + 2 * static_cast<uint32_t>(g.targets), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": " + std::to_string(g.targets) +
                      " gsums output(s) take as many (x, save_mean) input pairs after the gradient inputs: " +
                      std::to_string(x_at + 2 * g.targets) + " inputs, got " + std::to_string(call->n_in));
  const FrTensor& dx = call->out[0];
  for (int t = 0; t < g.targets; ++t) {
    const FrTensor &x = call->in[x_at + 2 * t], &mean = call->in[x_at + 2 * t + 1], &s = call->out[1 + t];
    const ChannelRows v = channel_rows(x, op);
    FR_PLUGIN_CHECK(numel(x) == numel(dx) && x.dtype == dx.dtype, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": x must have dx's size and dtype");
    FR_PLUGIN_CHECK(
        mean.dtype == FR_F32 && numel(mean) == v.c, FR_ERR_INVALID_ARGUMENT,
        std::string(op) + ": save_mean must be f32 with C = " + std::to_string(v.c) + " elements");
    FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * v.c, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": gsums must be f32 with 2C = " + std::to_string(2 * v.c) +
                        " elements, got " + std::to_string(numel(s)) + " of dtype " +
                        std::to_string(s.dtype));
    g.x[t] = x.data;
    g.mean[t] = data<float>(mean);
    g.sums[t] = data<float>(s);
    g.rows = v.rows;
    g.c = v.c;
  }
  return g;
}

// batchnorm_backward's gsums input (the sixth, without a fused relu) over `c` channels, or null when the call
// has none; checked: f32, 2c elements, and no fused relu (its dy must arrive masked).
inline const float* bn_grad_sums_input(const FrCall* call, int64_t c) {
  const bool relu = call->params && params<FrBatchNormParams>(call).relu;
  if (relu || call->n_in < 6) return nullptr;
  FR_PLUGIN_CHECK(call->n_in == 6, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_backward: without a fused relu it takes 5 inputs, or 6 with gsums; got " +
                      std::to_string(call->n_in));
  const FrTensor& s = call->in[5];
  FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * c, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_backward: gsums must be f32 with 2C = " + std::to_string(2 * c) +
                      " elements, got " + std::to_string(numel(s)) + " of dtype " + std::to_string(s.dtype));
  return data<float>(s);
}

// Where batchnorm_backward's dgamma is (dbeta follows): 1 after dx, or 0 in the weights-only form (ops.h:
// outputs {dgamma, dbeta}, the dx applied by the weight gradient of the conv that wrote x), which needs gsums
// and no fused relu. Checked: two or three outputs.
inline uint32_t bn_backward_dgamma_index(const FrCall* call) {
  FR_PLUGIN_CHECK(call->n_out == 2 || call->n_out == 3, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_backward: expected outputs {dx, dgamma, dbeta} or, weights only, {dgamma, "
                  "dbeta}; got " +
                      std::to_string(call->n_out));
  const bool relu = call->params && params<FrBatchNormParams>(call).relu;
  FR_PLUGIN_CHECK(call->n_out == 3 || (!relu && call->n_in == 6), FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_backward: the weights-only form (two outputs) takes its dy premasked with gsums "
                  "(6 inputs, no fused relu)");
  return call->n_out - 2;
}

}  // namespace fresco::sdk
