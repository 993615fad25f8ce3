// A batchnorm computed by the residual join that reads it (batchnorm_add, CompileOptions::fuse_joins) trains
// bit for bit like the unfused graph on the CPU (fp32: the same float operations in the same order): losses,
// every weight, gradient and momentum after several steps, and the evaluation logits (inference keeps the
// folded batchnorm and the add).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

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
  // an identity block (its main branch ends in a bn) and a projection block (bn on both branches)
  t.model(
       seq({conv(8, 3, 1, 1), bn(), relu(),
            residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(),
            residual({conv(16, 3, 2, 1), bn(), relu(), conv(16, 3, 1, 1), bn()}, {conv(16, 1, 2, 0), bn()}),
            relu(), gap(), fc(4)}))
      .data(data::synthetic_patches(32, 1), data::synthetic_patches(16, 2))
      .batch_size(16)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .device("cpu")
      .shuffle(false)
      .fuse_joins(fuse);
  t.compile();
  Trained r;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
    r.fused_nodes += n.op == FR_OP_BATCHNORM_ADD ? 1 : 0;
  std::vector<uint32_t> idx(32);
  std::iota(idx.begin(), idx.end(), 0u);
  for (int s = 0; s < 4; ++s) r.losses.push_back(t.train_step(idx.data() + 16 * (s % 2), 16));
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
