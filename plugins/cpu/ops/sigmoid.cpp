// CPU sigmoid forward y = 1 / (1 + exp(-x)) and backward dx = dy y (1 - y) from the output, element-wise in
// float; dx may alias dy. Test: test_pointwise.cpp.
#include <cmath>

#include "ops/pointwise.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(sigmoid) {
  return run_pointwise1(call, "sigmoid", [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
}

FR_CPU_KERNEL_RUN(sigmoid_backward) {
  return run_pointwise2(call, "sigmoid_backward", [](float dy, float y) { return dy * y * (1.0f - y); });
}

}  // namespace fresco::cpu
