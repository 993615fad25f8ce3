// A residual join applied by the conv that first reads it (CompileOptions::join_prologue, ops.h "Join
// prologue") trains like batchnorm_add on the CPU: the prologue rounds as fma(x, scale, shift) + r where the
// CPU batchnorm computes (x - mean) * scale + beta + r, so four SGD steps of a residual network agree to
// about 1e-5 in loss and every weight; the graph really takes the path (the identity block's join a
// statistics-only batchnorm, the projection block's first conv with the five prologue operands writing the
// join's map, which the shortcut then reads); with grad_sums and join_epilogue, whose input gradient masks by
// that map, it trains the same. A kernel that does not declare the form is refused for it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "e2e/legacy_conv.h"
#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"

using namespace fresco;

namespace {
struct Trained {
  std::vector<float> losses;
  test::Snapshot state;
  int join_convs = 0, bn_adds = 0, stats_only_bn = 0, join_epilogues = 0;
};

Trained train(CompileOptions::JoinPrologue mode, bool backward_fusions, bool fork = false) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.fork_shortcuts(fork);
  t.conv_prologue(CompileOptions::ConvPrologue::ON);
  t.join_prologue(mode);
  if (backward_fusions) {
    t.grad_sums(CompileOptions::GradSums::ON);
    t.join_epilogue(CompileOptions::JoinEpilogue::ON);
  }
  t.compile();
  Trained r;
  const auto& layers = t.compiled().arch.layers;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
    r.bn_adds += n.op == FR_OP_BATCHNORM_ADD;
    r.stats_only_bn += n.op == FR_OP_BATCHNORM && n.out.size() == 2;
    r.join_epilogues += n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 6;
    if (n.op != FR_OP_CONV2D || n.in.size() != 7) continue;
    ++r.join_convs;
    for (const LayerDescriptor& join : layers)  // it writes the join's map from the join's operands
      if (join.kind == LayerKind::ADD && join.applied_by_conv) {
        const LayerDescriptor& bn = layers[static_cast<size_t>(join.join_bn)];
        EXPECT_EQ(n.out[1], join.out) << n.label;
        EXPECT_EQ(n.in[0], layers[static_cast<size_t>(bn.input)].out) << n.label;
        EXPECT_EQ(n.in[6], layers[static_cast<size_t>(join.input2)].out) << n.label;
      }
  }
  r.losses = test::train_small_residual(t, 4);
  r.state = t.snapshot();
  return r;
}
}  // namespace

TEST(JoinPrologueCpu, AJoinAppliedByItsConvTrainsLikeBatchnormAdd) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained fused = train(CompileOptions::JoinPrologue::ON, false);
  const Trained plain = train(CompileOptions::JoinPrologue::OFF, false);
  // the identity block's join (read by the projection block's conv, then by its shortcut); the projection
  // block's own join feeds the pool
  EXPECT_EQ(fused.join_convs, 1);
  EXPECT_EQ(fused.bn_adds + 1, plain.bn_adds);
  EXPECT_EQ(fused.stats_only_bn, plain.stats_only_bn + 1);
  EXPECT_EQ(plain.join_convs, 0);
  EXPECT_EQ(train(CompileOptions::JoinPrologue::AUTO, false).join_convs, 0);  // AUTO: off until timed
  test::expect_same_training(fused.losses, fused.state, plain.losses, plain.state);
}

TEST(JoinPrologueCpu, ItsMapMasksTheJoinEpilogueAndTrainsTheSame) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained fused = train(CompileOptions::JoinPrologue::ON, true);
  const Trained plain = train(CompileOptions::JoinPrologue::OFF, true);
  EXPECT_EQ(fused.join_convs, 1);
  EXPECT_GE(fused.join_epilogues, 1);
  EXPECT_EQ(fused.join_epilogues, plain.join_epilogues);
  test::expect_same_training(fused.losses, fused.state, plain.losses, plain.state);
}

// With fork_shortcuts the projection shortcut that also reads the join runs on the side stream before the
// main branch's first conv, so that conv must not write the join's map: no join prologue there, and the
// training is the plain one (a review found the shortcut reading the map before it was written).
TEST(JoinPrologueCpu, AForkedShortcutKeepsItsJoin) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained forked = train(CompileOptions::JoinPrologue::ON, false, true);
  const Trained plain = train(CompileOptions::JoinPrologue::OFF, false, true);
  EXPECT_EQ(forked.join_convs, 0);
  test::expect_same_training(forked.losses, forked.state, plain.losses, plain.state);
}

// A kernel that does not declare the join prologue (FR_KERNEL_CONV_JOIN_PROLOGUE) is refused for a node that
// uses it, never handed a residual it would ignore.
TEST(JoinPrologueCpu, AKernelWithoutTheJoinPrologueIsRefusedForIt) {
  ASSERT_TRUE(test::load_legacy_conv());
  test::expect_prologue_conv_refused(true, "a conv2d node with a join prologue",
                                     {"FR_KERNEL_CONV_JOIN_PROLOGUE", "join_prologue"});
}
