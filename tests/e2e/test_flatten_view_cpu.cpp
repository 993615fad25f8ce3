// flatten as a view (a one-channel map: NHWC already in PyTorch's C,H,W order, no node): the layer after it
// hands back a gradient of the map's shape, so the backward of the conv or pool before the view runs (it used
// to be refused: the gradient had the flattened shape). Checked against finite differences of the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"

using namespace fresco;

namespace {
// The conv's weight gradient on 64 samples, by the backward and by central differences of the loss.
void expect_conv_gradient_matches(BluePrint model, float eps) {
  const data::Dataset samples = e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 64);
  DeepLearningTask t;
  t.model(std::move(model))
      .data(samples, samples)  // the evaluation's loss is the training batch's
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .val_batch_size(64)
      .shuffle(false)
      .optimizer(SGD(0.1f))
      .loss(CrossEntropyLoss())
      .device("cpu")
      .seed(3);
  t.compile();
  const auto before = t.snapshot();
  const std::vector<float> w0 = t.read_param(0, "weight");
  std::vector<uint32_t> idx(64);
  std::iota(idx.begin(), idx.end(), 0u);
  t.train_step(idx.data(), 64);
  std::vector<float> grad;
  for (const auto& [name, values] : t.snapshot())
    if (name == "G(conv0.weight)") grad = values;  // [K,3,3,1]: PyTorch's [K,1,3,3] order too
  t.restore(before);                               // the weights the gradient was taken at
  ASSERT_EQ(grad.size(), w0.size());
  const float scale = *std::max_element(grad.begin(), grad.end(),
                                        [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  ASSERT_GT(std::fabs(scale), 1e-4f);
  for (size_t i = 0; i < w0.size(); ++i) {
    std::vector<float> w = w0;
    w[i] = w0[i] + eps;
    t.write_param(0, "weight", w);
    const double up = t.evaluate().loss;
    w[i] = w0[i] - eps;
    t.write_param(0, "weight", w);
    const double down = t.evaluate().loss;
    const double fd = (up - down) / (2 * eps);
    EXPECT_NEAR(grad[i], fd, 1e-3 + 1e-2 * std::fabs(scale)) << "weight " << i;
  }
}
}  // namespace

TEST(FlattenView, OneChannelConvThenFlattenGradient) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  expect_conv_gradient_matches(seq({conv(1, 3), flatten(), fc(10)}), 1e-2f);
}

TEST(FlattenView, OneChannelPoolThenFlattenGradient) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  expect_conv_gradient_matches(seq({conv(1, 3), maxpool(2), flatten(), fc(10)}), 1e-3f);
}
