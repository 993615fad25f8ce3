// Batchnorm gradient sums handed over by the masking pass that writes the batchnorm's output gradient
// (CompileOptions::grad_sums, ops.h "Gradient sums") train like batchnorm's own sums pass on the CPU: only
// the f32 rounding of the handed-over totals differs, so four SGD steps of a residual network agree to about
// 1e-5 in loss and every weight, and the graph really takes that path (the stem's relu read twice, an
// identity join and a projection join: three masking passes with sums, three batchnorm backwards that read
// them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
struct Trained {
  std::vector<float> losses;
  std::vector<std::pair<std::string, std::vector<float>>> state;
  size_t masking_with_sums = 0, bn_given_sums = 0, bn_masked = 0;
};

Trained train(CompileOptions::GradSums mode) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.grad_sums(mode);
  t.compile();
  Trained r;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
    if ((n.op == FR_OP_RELU_BACKWARD || n.op == FR_OP_ADD_RELU_BACKWARD) && n.out.size() >= 2)
      ++r.masking_with_sums;
    if (n.op != FR_OP_BATCHNORM_BACKWARD) continue;
    FrBatchNormParams p{};
    std::memcpy(&p, n.params.data(), sizeof p);
    r.bn_given_sums += !p.relu && n.in.size() == 6;
    r.bn_masked += p.relu != 0;
  }
  r.losses = test::train_small_residual(t, 4);
  r.state = t.snapshot();
  return r;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0.0 ? num / den : num;
}
}  // namespace

TEST(GradSumsCpu, HandedOverGradientSumsTrainLikeTheBatchnormsOwnPass) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained sums = train(CompileOptions::GradSums::ON), plain = train(CompileOptions::GradSums::OFF);
  EXPECT_EQ(sums.masking_with_sums, 3u);
  EXPECT_EQ(sums.bn_given_sums, 4u);
  EXPECT_EQ(sums.bn_masked, plain.bn_masked - 1);  // the stem's relu mask moved into the masking pass
  EXPECT_EQ(plain.masking_with_sums, 0u);
  EXPECT_EQ(plain.bn_given_sums, 0u);
  ASSERT_EQ(sums.losses.size(), plain.losses.size());
  for (size_t s = 0; s < sums.losses.size(); ++s)
    EXPECT_NEAR(sums.losses[s], plain.losses[s], 1e-5 * std::fabs(plain.losses[s])) << "step " << s;
  ASSERT_EQ(sums.state.size(), plain.state.size());
  for (size_t i = 0; i < sums.state.size(); ++i) {
    EXPECT_EQ(sums.state[i].first, plain.state[i].first);
    EXPECT_LT(max_rel(sums.state[i].second, plain.state[i].second), 1e-4) << sums.state[i].first;
  }
  EXPECT_NE(sums.losses.front(), sums.losses.back());  // it really trained
}

// AUTO turns it on in mixed precision only: fp32 keeps batchnorm's own pass.
TEST(GradSumsCpu, AutoIsOffInFp32) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.compile();
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
    EXPECT_EQ(n.out.size() >= 2 && (n.op == FR_OP_RELU_BACKWARD || n.op == FR_OP_ADD_RELU_BACKWARD), false)
        << n.label;
}
