// Training-time augmentation (data/augment.h): draws are pure functions of (seed, epoch, sample) covering
// every offset and both flips; the image transform is PyTorch's RandomCrop(padding) then
// RandomHorizontalFlip; and a job trained with augmentation is reproducible bit for bit and differs from the
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
