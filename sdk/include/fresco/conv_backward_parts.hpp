// Which gradients a conv2d_backward call writes, and at which output index (ops.h: part 0 whole, 1 input
// gradient, 2 weight gradient), checked once for every backend. Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

struct ConvBackwardOutputs {
  int dw = -1, db = -1, dx = -1;  // output index of each gradient, -1 when this part does not write it
  uint32_t count = 0;
};

inline ConvBackwardOutputs conv_backward_outputs(const FrConvBackwardParams& p) {
  FR_PLUGIN_CHECK(p.part >= 0 && p.part <= 2, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: part must be 0, 1 or 2, found " + std::to_string(p.part));
  FR_PLUGIN_CHECK(p.part != 1 || p.need_dx, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: part 1 (input gradient) needs need_dx");
  ConvBackwardOutputs o;
  int next = 0;
  if (p.part != 1) {
    o.dw = next++;
    if (p.conv.has_bias) o.db = next++;
  }
  if (p.part == 1 || (p.part == 0 && p.need_dx)) o.dx = next++;
  o.count = static_cast<uint32_t>(next);
  return o;
}

}  // namespace fresco::sdk
