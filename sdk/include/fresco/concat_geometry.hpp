// Geometry of a concat / concat_backward call (ops.h: NHWC maps joined over channels) validated once for
// every backend: a, b and y agree in N, H, W and y has Ca + Cb channels. Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/conv_geometry.hpp"

namespace fresco::sdk {

struct ConcatShape {
  int64_t rows, ca, cb;  // positions N*H*W, channels of a and of b
};

// a, b the two parts, y the concatenated side; `op` names the op in error messages.
inline ConcatShape concat_shape(const FrTensor& a, const FrTensor& b, const FrTensor& y, const char* op) {
  for (int d = 0; d < 3; ++d)
    FR_PLUGIN_CHECK(dim_or_1(a, d) == dim_or_1(y, d) && dim_or_1(b, d) == dim_or_1(y, d),
                    FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": a " + shape_str(a) + ", b " + shape_str(b) + " and y " +
                        shape_str(y) + " differ in N, H or W");
  const ConcatShape s{dim_or_1(y, 0) * dim_or_1(y, 1) * dim_or_1(y, 2), dim_or_1(a, 3), dim_or_1(b, 3)};
  FR_PLUGIN_CHECK(dim_or_1(y, 3) == s.ca + s.cb, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": y has " + std::to_string(dim_or_1(y, 3)) + " channels, a and b " +
                      std::to_string(s.ca) + " + " + std::to_string(s.cb));
  return s;
}

}  // namespace fresco::sdk
