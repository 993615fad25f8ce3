// ops/strided_rows.h on the host: the multiply-high division against the hardware's, and the subsample's
// rows through it against the 64-bit form, position by position. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "ops/strided_rows.h"

namespace fresco::cuda {
namespace {

TEST(FastDivU31, MatchesDivisionForSmallAndLargeDivisors) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, (1u << 31) - 1);
  for (uint32_t d = 1; d < 3000; ++d) {
    const FastDivU31 f = FastDivU31::of(d);
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 2 * d, (1u << 31) - 1, (1u << 31) - d})
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    for (int k = 0; k < 200; ++k) {
      const uint32_t n = any(rng);
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
  for (uint32_t d :
       {4095u, 4096u, 4097u, 65535u, 65536u, 1000003u, (1u << 30), (1u << 30) + 1, (1u << 31) - 1}) {
    const FastDivU31 f = FastDivU31::of(d);
    for (int k = 0; k < 20000; ++k) {
      const uint32_t n = any(rng);
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
    ASSERT_EQ(f.div((1u << 31) - 1), ((1u << 31) - 1) / d);
  }
}

TEST(StridedRows, FastRowsAreTheSixtyFourBitRows) {
  struct Map {
    int64_t n, h, w;
    int32_t sh, sw;
  };
  for (const Map m : {Map{4, 32, 32, 2, 2}, Map{3, 16, 16, 2, 2}, Map{2, 7, 7, 2, 2}, Map{2, 5, 9, 3, 2},
                      Map{3, 1, 1, 2, 2}, Map{1, 56, 56, 2, 2}, Map{2, 8, 6, 1, 2}, Map{2, 9, 4, 2, 1}}) {
    const int64_t positions = m.n * m.h * m.w;
    const StridedRows fast = strided_rows(positions, m.h, m.w, m.sh, m.sw);
    ASSERT_TRUE(fast.fast);
    StridedRows slow = fast;
    slow.fast = false;
    int64_t kept = 0;
    for (int64_t r = 0; r < positions; ++r) {
      ASSERT_EQ(fast.row(r), slow.row(r)) << "row " << r << " of " << m.n << "x" << m.h << "x" << m.w;
      if (slow.row(r) >= 0) {
        ASSERT_EQ(slow.row(r), kept++);  // kept rows land in order, densely
      }
    }
    EXPECT_EQ(kept, m.n * ((m.h - 1) / m.sh + 1) * ((m.w - 1) / m.sw + 1));
  }
}

TEST(StridedRows, LargeMapsKeepTheSixtyFourBitForm) {
  const StridedRows ref{32, 32, 2, 2};
  const StridedRows big = strided_rows(int64_t{1} << 31, 32, 32, 2, 2);
  EXPECT_FALSE(big.fast);
  EXPECT_EQ(big.row(int64_t{3} << 30), ref.row(int64_t{3} << 30));
  const StridedRows near = strided_rows((int64_t{1} << 31) - 1024, 32, 32, 2, 2);
  EXPECT_TRUE(near.fast);
  const int64_t last = (int64_t{1} << 31) - 1024 - 1 - 31;  // the last image's last row, column 0
  EXPECT_EQ(near.row(last), ref.row(last));
  EXPECT_FALSE(strided_rows(0, 0, 0, 1, 1).fast);  // no subsample
}

}  // namespace
}  // namespace fresco::cuda
