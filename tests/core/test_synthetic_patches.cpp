// data::synthetic_patches: the learnable toy set of the examples and install checks (8x8x1, 4 classes; class
// k lights the 2x2 patch at (2k, 2k)); deterministic per seed; bad sizes are usage errors.
#include <gtest/gtest.h>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"

using namespace fresco;

TEST(SyntheticPatches, ShapeLabelsAndPatches) {
  const data::Dataset d = data::synthetic_patches(10, 3);
  EXPECT_EQ(d.n, 10);
  EXPECT_EQ(d.h * d.w * d.c, 64);
  EXPECT_EQ(d.num_classes, 4);
  ASSERT_EQ(d.images.size(), 640u);
  for (int64_t i = 0; i < d.n; ++i) {
    const int k = d.labels[static_cast<size_t>(i)];
    EXPECT_EQ(k, i % 4);
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx)
        EXPECT_EQ(d.images[static_cast<size_t>(i * 64 + (2 * k + dy) * 8 + 2 * k + dx)], 255);
  }
  EXPECT_EQ(data::synthetic_patches(10, 3).images, d.images);
  EXPECT_NE(data::synthetic_patches(10, 4).images, d.images);
  EXPECT_THROW(data::synthetic_patches(0, 1), Error);
}
