// CPU exact GELU forward y = 0.5 x (1 + erf(x / sqrt 2)) and backward dx = dy * (Phi(x) + x phi(x)),
// element-wise in float (erff/expf); dx may alias dy. Test: test_add_gelu_flatten.cpp.
#include <cmath>

#include "ops/pointwise.h"

namespace fresco::cpu {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

FR_CPU_KERNEL_RUN(gelu) {
  return run_pointwise1(call, "gelu", [](float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); });
}

FR_CPU_KERNEL_RUN(gelu_backward) {
  return run_pointwise2(call, "gelu_backward", [](float dy, float v) {
    const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    return dy * (cdf + v * pdf);
  });
}

}  // namespace fresco::cpu
