// Training-time augmentation (data/augment.h): draws are pure functions of (seed, epoch, sample) covering
// every offset and both flips; the image transform is PyTorch's RandomCrop(padding) then
// RandomHorizontalFlip, then Cutout's square clipped at the borders and filled with the given bytes; and a
// job trained with augmentation is reproducible bit for bit and differs from the
// same job without it.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "fresco/core/data/augment.h"

using namespace fresco;

TEST(Augment, DrawsArePureAndCoverEveryOffsetAndBothFlips) {
  const data::Augmentation a{4, true};
  std::set<std::pair<int, int>> offsets;
  int flips = 0;
  for (uint32_t s = 0; s < 20000; ++s) {
    const data::AugmentDraw d = data::augment_draw(a, 7, 3, s);
    const data::AugmentDraw again = data::augment_draw(a, 7, 3, s);
    ASSERT_EQ(d.dy, again.dy);
    ASSERT_EQ(d.dx, again.dx);
    ASSERT_EQ(d.flip, again.flip);
    ASSERT_TRUE(d.dy >= -4 && d.dy <= 4 && d.dx >= -4 && d.dx <= 4);
    offsets.insert({d.dy, d.dx});
    flips += d.flip;
  }
  EXPECT_EQ(offsets.size(), 81u);
  EXPECT_NEAR(flips, 10000, 400);
  int differ = 0;  // another epoch draws differently
  for (uint32_t s = 0; s < 100; ++s)
    differ += data::augment_draw(a, 7, 4, s).dx != data::augment_draw(a, 7, 3, s).dx;
  EXPECT_GT(differ, 50);
  const data::AugmentDraw none = data::augment_draw(data::Augmentation{}, 7, 3, 5);
  EXPECT_EQ(none.dy, 0);
  EXPECT_EQ(none.dx, 0);
  EXPECT_FALSE(none.flip);
}

TEST(Augment, CropsWithZeroFillThenFlips) {
  const int64_t h = 3, w = 4, c = 2;
  std::vector<uint8_t> src(static_cast<size_t>(h * w * c));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  auto at = [&](const std::vector<uint8_t>& img, int64_t y, int64_t x, int64_t k) {
    return img[static_cast<size_t>((y * w + x) * c + k)];
  };
  std::vector<uint8_t> dst(src.size());
  data::augment_image(src.data(), dst.data(), h, w, c, {0, 0, false});
  EXPECT_EQ(dst, src);
  data::augment_image(src.data(), dst.data(), h, w, c, {0, 0, true});
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) EXPECT_EQ(at(dst, y, x, 1), at(src, y, w - 1 - x, 1));
  data::augment_image(src.data(), dst.data(), h, w, c, {1, -2, false});  // window moved down 1, left 2
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sy = y + 1, sx = x - 2;
      const uint8_t want = sy < h && sx >= 0 ? at(src, sy, sx, 0) : 0;
      EXPECT_EQ(at(dst, y, x, 0), want) << y << "," << x;
    }
  data::augment_image(src.data(), dst.data(), h, w, c, {0, 1, true});  // crop, then mirror the crop
  for (int64_t x = 0; x < w; ++x) {
    const int64_t sx = (w - 1 - x) + 1;
    EXPECT_EQ(at(dst, 0, x, 0), sx < w ? at(src, 0, sx, 0) : 0) << x;
  }
}

TEST(Augment, CutoutFillsItsSquareClippedAtTheBorders) {
  const int64_t h = 6, w = 5, c = 2;
  const std::vector<uint8_t> src(static_cast<size_t>(h * w * c), 200);
  std::vector<uint8_t> dst(src.size());
  data::AugmentDraw d;
  d.cutout = 4;
  d.cut_at = 0u | (4u << 16);  // centre row 0, column 4: rows [0, 2), columns [2, 5)
  d.fill = {7, 9, 0, 0};
  data::augment_image(src.data(), dst.data(), h, w, c, d);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const bool in = y < 2 && x >= 2;
      EXPECT_EQ(dst[static_cast<size_t>((y * w + x) * c)], in ? 7 : 200) << y << "," << x;
      EXPECT_EQ(dst[static_cast<size_t>((y * w + x) * c + 1)], in ? 9 : 200) << y << "," << x;
    }
  // centres are drawn over every row and column, with the fill of the Augmentation
  data::Augmentation a;
  a.cutout = 3;
  a.cutout_fill = {1, 2, 3, 4};
  std::set<int64_t> rows, cols;
  for (uint32_t s = 0; s < 2000; ++s) {
    const data::AugmentDraw r = data::augment_draw(a, 11, 0, s);
    ASSERT_EQ(r.cutout, 3);
    ASSERT_EQ(r.fill, a.cutout_fill);
    rows.insert(static_cast<int64_t>(r.cut_at & 0xffffu) % 32);
    cols.insert(static_cast<int64_t>(r.cut_at >> 16) % 32);
  }
  EXPECT_EQ(rows.size(), 32u);
  EXPECT_EQ(cols.size(), 32u);
  EXPECT_EQ(data::augment_draw(data::Augmentation{}, 11, 0, 1).cutout, 0);
}
