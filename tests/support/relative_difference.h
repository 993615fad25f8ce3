// ||a - b|| / ||b|| (2-norms, in double): how far a tensor of one run is from the same tensor of another.
// Header-only, for every test executable.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace fresco::test {

inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d) / std::max(std::sqrt(n), 1e-30);
}

}  // namespace fresco::test
