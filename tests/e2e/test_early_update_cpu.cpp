// The early update on a conv network in fp32 on the CPU (CompileOptions::early_update forced on, with
// early_update_parts): the deep conv weights updated in parts during the backward (detached nodes) and the
// rest at the end of DEEP_FWD_BWD train bit for bit like the update after the first layer's backward: the
// CPU runs the nodes in order, the same float operations on the same values. The GPU runs of the same
// switch, where the parts really overlap the backward: test_cuda_low_precision_training.cpp
// EarlyUpdateGivesTheSameBits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

TEST(EarlyUpdateCpu, PartsDuringTheBackwardTrainBitForBitLikeTheLateUpdate) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto train = [](bool early, int parts, int& detached) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.early_update(early).early_update_parts(parts);
    t.compile();
    detached = 0;
    for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
      detached += n.detached ? 1 : 0;
    const std::vector<float> losses = test::train_small_residual(t, 4);
    return std::make_pair(losses, t.snapshot());
  };
  int none = 0, some = 0;
  const auto [late_losses, late_state] = train(false, 3, none);
  const auto [early_losses, early_state] = train(true, 3, some);
  EXPECT_EQ(none, 0);
  EXPECT_GE(some, 1);  // fp32: one update node per part
  EXPECT_EQ(early_losses, late_losses);
  ASSERT_EQ(early_state.size(), late_state.size());
  for (size_t i = 0; i < early_state.size(); ++i) {
    EXPECT_EQ(early_state[i].first, late_state[i].first);
    EXPECT_EQ(early_state[i].second, late_state[i].second) << early_state[i].first;
  }
  EXPECT_NE(late_losses.front(), late_losses.back());  // it really trained
}
