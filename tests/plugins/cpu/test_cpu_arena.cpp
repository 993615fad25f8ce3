// The CPU backend flushes denormals inside its kernels (MXCSR FTZ/DAZ in its own arena) and leaves the
// caller's floating-point mode alone: a relu over a denormal input writes 0 (DAZ), and the test thread's
// MXCSR control bits are the same before and after the kernel runs.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cstring>
#include <limits>

#include "plugins/cpu/op_harness.h"

TEST(CpuArena, KernelsFlushDenormalsAndRestoreTheCallersMode) {
  const unsigned before = _mm_getcsr();
  ASSERT_EQ(before & 0x8040u, 0u) << "the test thread must start in IEEE mode";
  std::vector<float> x(4096, std::numeric_limits<float>::denorm_min() * 8), y(4096, -1.0f);
  fresco::test::OpCall c(FR_OP_RELU);
  c.in(fresco::test::tensor(x, {1, 1, 1, 4096})).out(fresco::test::tensor(y, {1, 1, 1, 4096}));
  ASSERT_TRUE(c.run());
  for (float v : y) ASSERT_EQ(v, 0.0f) << "denormal inputs are read as zero inside the backend";
  // the mode (control bits); the sticky exception flags (bits 0-5) are status, which oneTBB's restore of the
  // thread's settings does not keep (set by whatever ran before in this process)
  constexpr unsigned kStatusFlags = 0x3Fu;
  EXPECT_EQ(_mm_getcsr() & ~kStatusFlags, before & ~kStatusFlags);
  volatile float tiny = std::numeric_limits<float>::denorm_min() * 8;
  EXPECT_GT(tiny * 1.0f, 0.0f) << "the caller keeps IEEE denormals";
}
