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
  test::Snapshot state;
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

}  // namespace

TEST(GradSumsCpu, HandedOverGradientSumsTrainLikeTheBatchnormsOwnPass) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained sums = train(CompileOptions::GradSums::ON), plain = train(CompileOptions::GradSums::OFF);
  EXPECT_EQ(sums.masking_with_sums, 3u);
  EXPECT_EQ(sums.bn_given_sums, 4u);
  EXPECT_EQ(sums.bn_masked, plain.bn_masked - 1);  // the stem's relu mask moved into the masking pass
  EXPECT_EQ(plain.masking_with_sums, 0u);
  EXPECT_EQ(plain.bn_given_sums, 0u);
  test::expect_same_training(sums.losses, sums.state, plain.losses, plain.state);
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
