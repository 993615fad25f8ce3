// An MLP with SiLU, tanh and sigmoid layers compiles and trains on the CPU backend end to end: 200 Adam steps
// on one batch of data::synthetic_patches bring the loss from ln 4 to under a tenth of it. Each kernel's
// gradient is checked by finite differences in test_pointwise.cpp and the wiring (x or y into the backward)
// by CompilerActivations.BackwardReadsInputOrOutput; this test does not by itself prove the gradients right.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

TEST(ActivationsCpu, MlpOverfitsOneBatch) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const data::Dataset d = data::synthetic_patches(64, 3);  // learnable: 8x8x1, 4 classes
  Optimizer adam = Adam();
  adam.lr = 0.01f;
  DeepLearningTask t;
  t.model(seq({fc(64), silu(), fc(64), tanh(), fc(64), sigmoid(), fc(4)}))
      .data(d, d)
      .batch_size(64)
      .optimizer(adam)
      .device("cpu")
      .shuffle(false);
  t.compile();
  std::vector<uint32_t> idx(64);
  std::iota(idx.begin(), idx.end(), 0u);
  const float first = t.train_step(idx.data(), 64);
  float last = first;
  for (int s = 0; s < 200; ++s) last = t.train_step(idx.data(), 64);
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  EXPECT_LT(last, 0.1f * first) << "first " << first << " last " << last;
}
