// Reference dropout, as ops.h defines it: element i is kept iff u >= p, where u is lane (i % 4) of the Philox
// draw fr_draw4(seed, FR_RNG_DROPOUT, layer, step, i / 4) mapped to [0, 1) by fr_u01 (Philox itself is
// checked against Random123 in tests/core/test_philox.cpp); kept values are scaled by 1 / (1 - p). Backward
// applies the same mask.
#pragma once

#include <cstdint>
#include <vector>

#include "fresco/ops.h"
#include "fresco/philox.h"

namespace fresco::ref {

inline std::vector<bool> dropout_mask(uint64_t seed, uint32_t layer, uint32_t step, size_t n, float p) {
  std::vector<bool> keep(n);
  for (size_t i = 0; i < n; ++i) {
    const FrPhilox4 r = fr_draw4(seed, FR_RNG_DROPOUT, layer, step, static_cast<uint64_t>(i / 4));
    keep[i] = fr_u01(r.v[i % 4]) >= p;
  }
  return keep;
}

// y = mask * x / (1 - p); with p == 1 every element is dropped.
inline std::vector<double> dropout_apply(const std::vector<double>& x, const std::vector<bool>& keep,
                                         double p) {
  std::vector<double> y(x.size());
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  for (size_t i = 0; i < x.size(); ++i) y[i] = keep[i] ? x[i] * scale : 0.0;
  return y;
}

}  // namespace fresco::ref
