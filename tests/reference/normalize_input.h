// Reference input normalisation in double precision: uint8 NHWC -> y = (x / 255 - mean[c]) / std[c], with the
// channel index c = i % C (NHWC: channels innermost). Used by tests/plugins/cpu/test_normalize_input.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace fresco::ref {

inline std::vector<double> normalize_input(const std::vector<uint8_t>& x, int channels, const float* mean,
                                           const float* stdev) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % static_cast<size_t>(channels);
    y[i] = (static_cast<double>(x[i]) / 255.0 - static_cast<double>(mean[c])) / static_cast<double>(stdev[c]);
  }
  return y;
}

}  // namespace fresco::ref
