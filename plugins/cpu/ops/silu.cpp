// CPU SiLU forward y = x sigmoid(x) and backward dx = dy s (1 + x (1 - s)), s = sigmoid(x), element-wise in
// float; dx may alias dy. Test: test_pointwise.cpp.
#include <cmath>

#include "ops/pointwise.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(silu) {
  return run_pointwise1(call, "silu", [](float x) { return x / (1.0f + std::exp(-x)); });
}

FR_CPU_KERNEL_RUN(silu_backward) {
  return run_pointwise2(call, "silu_backward", [](float dy, float x) {
    const float s = 1.0f / (1.0f + std::exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  });
}

}  // namespace fresco::cpu
