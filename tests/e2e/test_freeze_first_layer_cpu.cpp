// CompileOptions::freeze_first_layer on the CPU: the first conv keeps its initial weights bit for bit over
// several SGD steps with momentum and weight decay (no gradient, no momentum, no decay: PyTorch's
// requires_grad off), while the rest trains; its first step updates every other parameter with the same bits
// as the unfrozen model's first step (their gradients do not depend on the first layer's).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"

using namespace fresco;

namespace {
using State = std::vector<std::pair<std::string, std::vector<float>>>;

// grad_sums ON: the batchnorm after the stem takes its gradient sums from the masking pass, and when frozen
// runs its weights-only form (no dx).
State train(bool freeze, int steps, float* loss_first = nullptr, float* loss_last = nullptr,
            bool grad_sums = false) {
  static const data::Dataset samples =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 256);
  DeepLearningTask t;
  t.model(seq({conv(8, 3, 1, 1), bn(), relu(),
               residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(), maxpool(2),
               conv(16, 3, 1, 1), bn(), relu(), gap(), fc(10)}))
      .data(samples, samples)
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .loss(CrossEntropyLoss())
      .device("cpu")
      .seed(5)
      .grad_sums(grad_sums ? CompileOptions::GradSums::ON : CompileOptions::GradSums::AUTO)
      .freeze_first_layer(freeze);
  t.compile();
  std::vector<uint32_t> idx(256);
  std::iota(idx.begin(), idx.end(), 0u);
  for (int s = 0; s < steps; ++s) {
    const float loss = t.train_step(idx.data() + 64 * (s % 4), 64);
    if (s == 0 && loss_first) *loss_first = loss;
    if (loss_last) *loss_last = loss;
  }
  return t.snapshot();
}

const std::vector<float>& tensor(const State& s, const std::string& name) {
  for (const auto& [n, v] : s)
    if (n == name) return v;
  ADD_FAILURE() << name << " not in the state";
  static const std::vector<float> none;
  return none;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
bool all_zero(const std::vector<float>& a) {
  for (float v : a)
    if (v != 0.0f) return false;
  return true;
}
}  // namespace

TEST(FreezeFirstLayer, TheFirstConvKeepsItsWeightsWhileTheRestTrains) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  const State init = train(true, 0);
  float first = 0, last = 0;
  const State frozen = train(true, 12, &first, &last);
  EXPECT_TRUE(same_bits(tensor(frozen, "conv0.weight"), tensor(init, "conv0.weight")));
  EXPECT_TRUE(all_zero(tensor(frozen, "G(conv0.weight)")));
  EXPECT_TRUE(all_zero(tensor(frozen, "M(conv0.weight)")));
  int others = 0;
  for (size_t i = 0; i < frozen.size(); ++i) {  // every other master weight trains
    const std::string& name = frozen[i].first;
    if (name.find('(') != std::string::npos || name == "conv0.weight") continue;
    ++others;
    EXPECT_FALSE(same_bits(frozen[i].second, init[i].second)) << name << " did not train";
  }
  EXPECT_EQ(others, 13);   // 3 more convs, 4 batchnorms' weights and biases, the fc's weight and bias
  EXPECT_LT(last, first);  // and it learns
}

TEST(FreezeFirstLayer, FirstStepOfTheOthersEqualsTheUnfrozenModels) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  for (bool sums : {false, true}) {
    const State init = train(false, 0), frozen = train(true, 1, nullptr, nullptr, sums),
                trained = train(false, 1, nullptr, nullptr, sums);
    ASSERT_EQ(frozen.size(), trained.size());
    for (size_t i = 0; i < frozen.size(); ++i) {
      const std::string& name = frozen[i].first;
      if (name.find("conv0.weight") != std::string::npos) continue;
      EXPECT_TRUE(same_bits(frozen[i].second, trained[i].second)) << name << (sums ? " (grad sums)" : "");
    }
    EXPECT_FALSE(same_bits(tensor(trained, "conv0.weight"), tensor(init, "conv0.weight")));
    EXPECT_TRUE(same_bits(tensor(frozen, "conv0.weight"), tensor(init, "conv0.weight")));
  }
}
