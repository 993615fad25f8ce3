// A batchnorm computed by the residual join that reads it (batchnorm_add, CompileOptions::fuse_joins) trains
// bit for bit like the unfused graph on the CPU (fp32: the same float operations in the same order): losses,
// every weight, gradient and momentum after several steps, and the evaluation logits (inference keeps the
// folded batchnorm and the add).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
struct Trained {
  std::vector<float> losses, logits;
  std::vector<std::pair<std::string, std::vector<float>>> state;
  size_t fused_nodes = 0;
};

Trained train(bool fuse) {
  DeepLearningTask t;
  test::configure_small_residual(t);  // an identity block and a projection block
  t.fuse_joins(fuse);
  t.compile();
  Trained r;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
    r.fused_nodes += n.op == FR_OP_BATCHNORM_ADD ? 1 : 0;
  r.losses = test::train_small_residual(t, 4);
  r.state = t.snapshot();
  r.logits = t.test_logits(16);
  return r;
}
}  // namespace

TEST(FusedJoinCpu, BatchNormComputedByTheJoinTrainsBitForBitLikeTheUnfusedGraph) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained fused = train(true), plain = train(false);
  EXPECT_EQ(fused.fused_nodes, 2u);  // both joins compute their main branch's bn
  EXPECT_EQ(plain.fused_nodes, 0u);
  EXPECT_EQ(fused.losses, plain.losses);
  ASSERT_EQ(fused.state.size(), plain.state.size());
  for (size_t i = 0; i < fused.state.size(); ++i) {
    EXPECT_EQ(fused.state[i].first, plain.state[i].first);
    EXPECT_EQ(fused.state[i].second, plain.state[i].second) << fused.state[i].first;
  }
  EXPECT_EQ(fused.logits, plain.logits);
  EXPECT_NE(fused.losses.front(), fused.losses.back());  // it really trained
}
