// bn(momentum, eps) end to end on the CPU: after one training step the running statistics are PyTorch's
// (1 - momentum) running + momentum batch (unbiased variance), and the evaluation's folded batchnorm divides
// by sqrt(running_var + eps). A 1x1 conv with weight 1 feeds the batchnorm the normalized pixels themselves,
// and an fc that picks pixels 0..9 shows its output, so both are checked against the host's arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"

using namespace fresco;

TEST(BatchnormSettings, MomentumAndEpsReachTheRunningStatisticsAndTheFold) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  const data::Dataset samples = e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 64);
  const float momentum = 0.3f, eps = 0.05f, mean = 0.286f, stdv = 0.353f;
  DeepLearningTask t;
  t.model(seq({conv(1, 1), bn(momentum, eps), flatten(), fc(10)}))
      .data(samples, samples)
      .normalize(Normalization{{mean}, {stdv}})
      .batch_size(64)
      .val_batch_size(64)
      .optimizer(SGD())
      .loss(CrossEntropyLoss())
      .device("cpu");
  t.compile();
  t.write_param(0, "weight", {1.0f});
  auto pixel = [&](int64_t s, int64_t i) {
    return (static_cast<double>(samples.images[static_cast<size_t>(s * 784 + i)]) / 255.0 - mean) / stdv;
  };
  std::vector<uint32_t> idx(64);
  std::iota(idx.begin(), idx.end(), 0u);
  t.train_step(idx.data(), 64);
  double sum = 0, sq = 0;
  const double n = 64.0 * 784.0;
  for (int64_t s = 0; s < 64; ++s)
    for (int64_t i = 0; i < 784; ++i) sum += pixel(s, i), sq += pixel(s, i) * pixel(s, i);
  const double batch_mean = sum / n, unbiased = (sq - sum * sum / n) / (n - 1);
  const float rm = t.read_param(1, "running_mean")[0], rv = t.read_param(1, "running_var")[0];
  EXPECT_NEAR(rm, momentum * batch_mean, 1e-5);
  EXPECT_NEAR(rv, (1 - momentum) * 1.0 + momentum * unbiased, 1e-5);
  // Evaluation: gamma 1, beta 0, the conv weight back to 1, and an fc whose logit j is pixel j.
  t.write_param(0, "weight", {1.0f});
  t.write_param(1, "weight", {1.0f});
  t.write_param(1, "bias", {0.0f});
  std::vector<float> w(10 * 784, 0.0f);
  for (int j = 0; j < 10; ++j) w[static_cast<size_t>(j * 784 + j)] = 1.0f;
  t.write_param(3, "weight", w);
  t.write_param(3, "bias", std::vector<float>(10, 0.0f));
  const std::vector<float> logits = t.test_logits(1);
  ASSERT_EQ(logits.size(), 10u);
  for (int j = 0; j < 10; ++j)
    EXPECT_NEAR(logits[static_cast<size_t>(j)], (pixel(0, j) - rm) / std::sqrt(rv + eps), 1e-5)
        << "pixel " << j;
}
