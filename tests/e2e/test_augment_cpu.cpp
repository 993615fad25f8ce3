// A job trained with augmentation (crop and flip; cutout) on the CPU is reproducible bit for bit and differs
// from the same job without it; an oversized crop padding or cutout is a configuration error.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fresco/core/data/augment.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
std::vector<std::pair<std::string, std::vector<float>>> train(const data::Augmentation& aug) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  t.model(seq({conv(4, 3, 1, 1), bn(), relu(), gap(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(16, 2))
      .batch_size(16)
      .epochs(2)
      .optimizer(SGD(0.9f).base_lr(0.05f))
      .device("cpu")
      .seed(3);
  t.augment(aug);
  t.compile();
  t.run();
  return t.snapshot();
}
}  // namespace

TEST(AugmentCpu, AugmentedTrainingIsReproducibleAndDiffers) {
  data::Augmentation cutout;
  cutout.cutout = 4;
  const auto plain = train(data::Augmentation{});
  for (const data::Augmentation& aug : {data::Augmentation{2, true}, cutout}) {
    const auto a = train(aug), b = train(aug);
    ASSERT_EQ(a.size(), b.size());
    bool differs = false;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].second, b[i].second) << a[i].first;
      differs |= a[i].second != plain[i].second;
    }
    EXPECT_TRUE(differs);
  }
  data::Augmentation huge;
  huge.cutout = 9;
  DeepLearningTask too_big;
  too_big.model(seq({fc(4)}))
      .data(data::synthetic_patches(8, 1), data::synthetic_patches(8, 2))
      .augment(huge)
      .device("cpu");
  EXPECT_THROW(too_big.plan(), Error);  // cutout at most the 8x8 image's side
  DeepLearningTask bad;
  bad.model(seq({fc(4)}))
      .data(data::synthetic_patches(8, 1), data::synthetic_patches(8, 2))
      .augment(data::Augmentation{8, false})
      .device("cpu");
  EXPECT_THROW(bad.plan(), Error);  // crop_pad must be below the 8x8 image size
}
