// Checks of the per-channel sums operand (ops.h): conv2d's optional second output and a training
// batchnorm's optional input, shared by every backend so the messages and rules are the same. Header-only,
// C++17.
#pragma once

#include <string>

#include "fresco/conv_prologue.hpp"
#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// The sums output of a conv2d call with `k` output channels, or null when the call has none; checked: f32,
// 2k elements, no bias. It is the second output, or the third after a batchnorm prologue's applied map
// (conv_prologue.hpp).
inline uint32_t conv_sums_index(const FrCall* call) {
  return has_conv_prologue(call) ? 2 : 1;
}
inline bool has_conv_sums(const FrCall* call) {
  return call->n_out > conv_sums_index(call);
}
inline float* conv_sums_output(const FrCall* call, int64_t k) {
  const uint32_t at = conv_sums_index(call);
  if (call->n_out <= at) return nullptr;
  const FrTensor& s = call->out[at];
  FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * k, FR_ERR_INVALID_ARGUMENT,
                  "conv2d: the sums output must be f32 with 2K = " + std::to_string(2 * k) +
                      " elements, got " + std::to_string(numel(s)) + " of dtype " + std::to_string(s.dtype));
  FR_PLUGIN_CHECK(!params<FrConvParams>(call).has_bias, FR_ERR_UNSUPPORTED,
                  "conv2d: a sums output is supported without a bias only");
  return data<float>(s);
}

// The sums input (in[index]) of a training batchnorm over `c` channels, or null when the call has none;
// checked: f32, 2c elements.
inline const float* bn_sums_input(const FrCall* call, uint32_t index, int64_t c, const char* op) {
  if (call->n_in <= index) return nullptr;
  const FrTensor& s = call->in[index];
  FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * c, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": the sums input must be f32 with 2C = " + std::to_string(2 * c) +
                      " elements, got " + std::to_string(numel(s)) + " of dtype " + std::to_string(s.dtype));
  return data<float>(s);
}

}  // namespace fresco::sdk
