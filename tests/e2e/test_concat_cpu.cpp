// A concat block really computes and back-propagates on the CPU: the first conv's weight gradient, which
// reaches it through both branches of a concat (the conv branch and the identity branch, split by
// concat_backward and summed), matches central finite differences of the training loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

TEST(ConcatCpu, FirstConvGradientThroughBothBranchesMatchesFiniteDifferences) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  // Smooth activations (gelu), so finite differences are not blurred by relu kinks.
  t.model(seq({conv(4, 3, 1, 1), bn(), gelu(), concat({conv(6, 3, 1, 1), bn(), gelu()}), gap(), fc(4)}))
      .data(data::synthetic_patches(16, 1), data::synthetic_patches(8, 2))
      .batch_size(16)
      .optimizer(SGD().base_lr(1e-30f))  // steps that leave the weights where they are
      .device("cpu")
      .shuffle(false);
  t.compile();
  std::vector<uint32_t> idx(16);
  std::iota(idx.begin(), idx.end(), 0u);
  t.train_step(idx.data(), 16);
  std::vector<float> grad;
  for (auto& [name, v] : t.snapshot())
    if (name == "G(conv0.weight)") grad = v;
  ASSERT_EQ(grad.size(), 36u);  // [4, 3, 3, 1]: the same order as PyTorch's [4, 1, 3, 3]
  const std::vector<float> w = t.read_param(0, "weight");
  const float h = 1e-2f;
  double worst = 0, scale = 0;
  for (size_t j = 0; j < w.size(); j += 5) {
    std::vector<float> wp = w, wm = w;
    wp[j] += h, wm[j] -= h;
    t.write_param(0, "weight", wp);
    const double lp = t.train_step(idx.data(), 16);
    t.write_param(0, "weight", wm);
    const double lm = t.train_step(idx.data(), 16);
    const double fd = (lp - lm) / (2.0 * h);
    worst = std::max(worst, std::fabs(fd - grad[j]));
    scale = std::max(scale, std::fabs(fd));
  }
  t.write_param(0, "weight", w);
  ASSERT_GT(scale, 1e-4);  // the gradient is not trivially zero
  EXPECT_LE(worst, 2e-3 * scale) << "worst |fd - grad| " << worst << " of " << scale;
}
