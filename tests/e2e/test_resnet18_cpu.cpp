// ResNet-18 (models::resnet18, CIFAR form) compiles and trains on the CPU backend: repeated steps on one
// fixed batch of 32x32x3 images drive the loss down (it can only fall if the forward pass, every residual
// block's backward and the SGD update fit together). Per-layer numerics are covered by the op tests and the
// golden cases.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/models.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
data::Dataset images(int64_t n, const char* name) {
  data::Dataset d;
  d.name = name;
  d.n = n;
  d.h = d.w = 32;
  d.c = 3;
  d.num_classes = 10;
  d.images.resize(static_cast<size_t>(n * 32 * 32 * 3));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(i % 10));
  return d;
}
}  // namespace

TEST(ResNet18Cpu, OverfitsOneBatch) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  t.model(models::resnet18(10))
      .data(images(8, "noise/train"), images(8, "noise/test"))
      .batch_size(8)
      .optimizer(SGD(0.9f))
      .device("cpu")
      .shuffle(false);
  t.compile();
  std::vector<uint32_t> idx(8);
  std::iota(idx.begin(), idx.end(), 0u);
  const float first = t.train_step(idx.data(), 8);
  float last = first;
  for (int s = 0; s < 7; ++s) last = t.train_step(idx.data(), 8);
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_NEAR(first, std::log(10.0f), 1.0f);  // random init: close to chance
  EXPECT_LT(last, 0.5f * first) << "first " << first << " last " << last;
}
