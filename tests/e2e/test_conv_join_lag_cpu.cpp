// CompileOptions::conv_join_lag_max changes only which weight gradient a conv input gradient waits for on a
// GPU (and how long the side stream's operands stay allocated): on the CPU, which runs every node in order,
// the small residual network trains to the same bits with every conv join lagged as without.
#include <gtest/gtest.h>

#include <cstring>

#include "e2e/small_residual_task.h"

using namespace fresco;

TEST(ConvJoinLagCpu, SameBitsWithEveryConvJoinLagged) {
  std::vector<float> losses[2];
  std::vector<std::pair<std::string, std::vector<float>>> snaps[2];
  for (int lag = 0; lag < 2; ++lag) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.conv_join_lag(lag ? (1 << 20) : 0);
    t.compile();
    losses[lag] = test::train_small_residual(t, 6);
    snaps[lag] = t.snapshot();
  }
  ASSERT_EQ(losses[0].size(), losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_EQ(losses[0][i], losses[1][i]) << "step " << i;
  ASSERT_EQ(snaps[0].size(), snaps[1].size());
  for (size_t i = 0; i < snaps[0].size(); ++i)
    EXPECT_EQ(0, std::memcmp(snaps[0][i].second.data(), snaps[1][i].second.data(),
                             snaps[0][i].second.size() * sizeof(float)))
        << snaps[0][i].first;
}
