// CompileOptions::conv_join_lag_max changes only which weight gradient a conv input gradient waits for on a
// GPU (and how long the side stream's operands stay allocated): on the CPU, which runs every node in order,
// the small residual network trains to the same bits with every conv join lagged as without.
#include <gtest/gtest.h>

#include "e2e/small_residual_task.h"

using namespace fresco;

TEST(ConvJoinLagCpu, SameBitsWithEveryConvJoinLagged) {
  test::expect_same_bits([](DeepLearningTask& t) { t.conv_join_lag(0); },
                         [](DeepLearningTask& t) { t.conv_join_lag(1 << 20); });
}
