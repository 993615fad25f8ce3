// ops/rounds_to_zero.h: kRoundsToZeroBelow<T> is the largest float that rounds to a non-positive T, checked
// with the host's round-to-nearest-even conversions (the device's cvt.rn rounds the same way): the threshold
// itself and everything below it round to zero (or are negative), the next float above rounds to the
// smallest positive subnormal, and NaN, negatives and -0 are not above it. Host only: runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/rounds_to_zero.h"

namespace fresco::cuda {
namespace {

float round_trip(float v, __half) {
  return __half2float(__float2half_rn(v));
}
float round_trip(float v, __nv_bfloat16) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

template <class T>
void expect_threshold(float smallest_subnormal) {
  const float k = kRoundsToZeroBelow<T>;
  EXPECT_EQ(k, smallest_subnormal / 2);
  EXPECT_EQ(round_trip(k, T{}), 0.0f) << "the tie goes to even";
  EXPECT_EQ(round_trip(std::nextafter(k, 0.0f), T{}), 0.0f);
  const float above = std::nextafter(k, 1.0f);
  EXPECT_EQ(round_trip(above, T{}), smallest_subnormal) << "the next float above rounds up";
  for (const float v : {above, 2 * k, 1e-3f, 1.0f}) EXPECT_GT(round_trip(v, T{}), 0.0f) << v;
  for (const float v : {-0.0f, -k, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_FALSE(v > k) << v;
    EXPECT_FALSE(round_trip(v, T{}) > 0.0f) << v;
  }
}

TEST(RoundsToZero, ThresholdIsHalfTheSmallestSubnormal) {
  expect_threshold<__half>(std::ldexp(1.0f, -24));
  expect_threshold<__nv_bfloat16>(std::ldexp(1.0f, -133));
  EXPECT_EQ(kRoundsToZeroBelow<float>, 0.0f);
}

}  // namespace
}  // namespace fresco::cuda
