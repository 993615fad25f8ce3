// data::AreaResize (progressive resolution's images): a copy at the same size, rounded block means at an
// integer factor, exact fractional weights otherwise (checked against the overlaps worked by hand), channels
// kept apart, and sizes it cannot honour refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fresco/core/data/resize.h"
#include "fresco/core/error.h"

using namespace fresco;
using data::AreaResize;

TEST(AreaResize, TheSameSizeIsACopy) {
  std::vector<uint8_t> src(5 * 3 * 2), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(7 * i + 3);
  const AreaResize r(5, 3, 5, 3);
  EXPECT_TRUE(r.identity());
  r.apply(src.data(), dst.data(), 2);
  EXPECT_EQ(dst, src);
}

TEST(AreaResize, AnIntegerFactorGivesTheRoundedBlockMeans) {
  // 4 x 4, one channel, to 2 x 2: each output is its 2 x 2 block's mean, halves rounded up
  const std::vector<uint8_t> src = {1, 2, 10,  10,  //
                                    3, 4, 10,  11,  //
                                    0, 0, 255, 255, 0, 1, 255, 254};
  std::vector<uint8_t> dst(4);
  AreaResize(4, 4, 2, 2).apply(src.data(), dst.data(), 1);
  EXPECT_EQ(dst, (std::vector<uint8_t>{3, 10, 0, 255}));  // 2.5 -> 3, 10.25, 0.25, 254.75
  // 3 x 1 -> 1 x 1: (1 + 2 + 2) / 3 = 1.67 -> 2
  const std::vector<uint8_t> col = {1, 2, 2};
  uint8_t one = 0;
  AreaResize(3, 1, 1, 1).apply(col.data(), &one, 1);
  EXPECT_EQ(one, 2);
}

TEST(AreaResize, AFractionalFactorWeighsThePixelsByTheirOverlap) {
  // 3 -> 2 across: output 0 covers [0, 1.5): pixel 0 whole, pixel 1 half -> (2 a + b) / 3; output 1:
  // (b + 2 c) / 3. Two rows to one: their mean.
  const std::vector<uint8_t> src = {30, 60, 90,  //
                                    0,  0,  3};
  std::vector<uint8_t> dst(2);
  AreaResize(2, 3, 1, 2).apply(src.data(), dst.data(), 1);
  // row 0: 40, 80; row 1: 0, 2; means 20, 41
  EXPECT_EQ(dst, (std::vector<uint8_t>{20, 41}));
  // A constant image stays constant at any factor (the weights add up to one exactly).
  std::vector<uint8_t> flat(28 * 28 * 3, 177), small(20 * 13 * 3);
  AreaResize(28, 28, 20, 13).apply(flat.data(), small.data(), 3);
  for (uint8_t v : small) ASSERT_EQ(v, 177);
}

TEST(AreaResize, ChannelsStayApart) {
  // 2 x 2 x 3 -> 1 x 1 x 3: each channel's own mean
  const std::vector<uint8_t> src = {0, 100, 255, 4, 100, 255, 8, 100, 255, 12, 104, 251};
  std::vector<uint8_t> dst(3);
  AreaResize(2, 2, 1, 1).apply(src.data(), dst.data(), 3);
  EXPECT_EQ(dst, (std::vector<uint8_t>{6, 101, 254}));
}

TEST(AreaResize, RefusesGrowingAndEmptySizes) {
  EXPECT_THROW(AreaResize(8, 8, 9, 8), Error);
  EXPECT_THROW(AreaResize(8, 8, 8, 0), Error);
  EXPECT_THROW(AreaResize(0, 8, 0, 8), Error);
  uint8_t b = 0;
  EXPECT_THROW(AreaResize().apply(&b, &b, 1), Error);
}
