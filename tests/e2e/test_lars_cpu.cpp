// LARS (Optimizer::Type::LARS; ops.h, lars_update) in training on the CPU backend: after one step, every conv
// and fc weight moved by its own trust ratio eta ||w|| / ||g + wd w|| times its decayed gradient (the
// momentum buffer starts as that product), every 1-D parameter (batchnorm's weight and bias, the biases) by
// its plain gradient with neither decay nor ratio; and a run trains. The kernels:
// tests/plugins/cpu/test_optimizers.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
std::unique_ptr<DeepLearningTask> lars_task(float lr, float wd, float eta) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn(), relu(), flatten(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(LARS(0.9f, eta).base_lr(lr).with_weight_decay(wd))
      .epochs(3)
      .shuffle(false)
      .device("cpu");
  t->compile();
  return t;
}

std::map<std::string, std::vector<float>> by_name(
    const std::vector<std::pair<std::string, std::vector<float>>>& s) {
  return {s.begin(), s.end()};
}

bool one_d(const std::string& name) {  // batchnorm's weight and bias, and every bias
  return name.find(".bias") != std::string::npos || name.rfind("bn", 0) == 0;
}
}  // namespace

TEST(LarsCpu, OneStepScalesEachWeightTensorByItsTrustRatio) {
  const float lr = 0.5f, wd = 1e-2f, eta = 2e-2f;
  auto t = lars_task(lr, wd, eta);
  const auto before = by_name(t->snapshot());
  t->run_steps(1);
  const auto after = by_name(t->snapshot());
  int weights = 0, excluded = 0;
  for (const auto& [name, w0] : before) {
    if (name.find('(') != std::string::npos) continue;  // G(...), M(...): read below
    SCOPED_TRACE(name);
    const std::vector<float>& w1 = after.at(name);
    const std::vector<float>& g = after.at("G(" + name + ")");
    const std::vector<float>& m = after.at("M(" + name + ")");
    const bool plain = one_d(name);
    double wn = 0, dn = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      const double d = static_cast<double>(g[i]) + (plain ? 0.0 : wd * static_cast<double>(w0[i]));
      wn += static_cast<double>(w0[i]) * w0[i], dn += d * d;
    }
    const double q = plain || wn == 0 || dn == 0 ? 1.0 : eta * std::sqrt(wn) / std::sqrt(dn);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      const double d = (static_cast<double>(g[i]) + (plain ? 0.0 : wd * static_cast<double>(w0[i]))) * q;
      worst = std::max({worst, std::fabs(m[i] - d), std::fabs(w1[i] - (w0[i] - lr * d))});
      scale = std::max({scale, std::fabs(d), std::fabs(static_cast<double>(w0[i]))});
    }
    EXPECT_LE(worst, 1e-5 * std::max(scale, 1e-3)) << "q " << q;
    if (!plain) {
      EXPECT_LT(q, 0.5) << "the ratio scaled the step";  // eta 0.02: far below 1 here
    }
    (plain ? excluded : weights) += 1;
  }
  EXPECT_EQ(weights, 3);   // two convs, the fc
  EXPECT_GE(excluded, 5);  // two batchnorms' weight and bias, the fc's bias
  const TrainingResult r = t->run();
  EXPECT_LT(r.epochs.back().train_loss, r.epochs.front().train_loss);
}
