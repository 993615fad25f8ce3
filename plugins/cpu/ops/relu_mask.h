// The relu's gradient mask on the CPU: g where y > 0, else +0 (a select, as PyTorch's threshold_backward,
// so an inf or NaN gradient is masked too), written with a bit mask so the loops that use it vectorise; a
// conditional load or select in those loops did not (batchnorm_backward with its fused relu ran 6x slower
// than without, bench_resnet_step --device cpu --profile 2). Tests: test_batchnorm.cpp, test_relu.cpp.
#pragma once

#include <bit>
#include <cstdint>

namespace fresco::cpu {

inline float relu_masked(float g, float y) {
  const uint32_t keep = 0u - static_cast<uint32_t>(y > 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(g) & keep);
}

}  // namespace fresco::cpu
