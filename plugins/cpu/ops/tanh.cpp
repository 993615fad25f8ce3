// CPU tanh forward and backward dx = dy (1 - y^2) from the output, element-wise in float; dx may alias dy.
// Test: test_pointwise.cpp.
#include <cmath>

#include "ops/pointwise.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(tanh) {
  return run_pointwise1(call, "tanh", [](float x) { return std::tanh(x); });
}

FR_CPU_KERNEL_RUN(tanh_backward) {
  return run_pointwise2(call, "tanh_backward", [](float dy, float y) { return dy * (1.0f - y * y); });
}

}  // namespace fresco::cpu
