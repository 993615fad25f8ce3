// CompileOptions::fork_shortcuts changes only which stream a projection shortcut's layers run on (and how
// long their maps are planned): on the CPU, which runs every node in order, the small residual network trains
// to the same bits with its projection forked as without.
#include <gtest/gtest.h>

#include <cstring>

#include "e2e/small_residual_task.h"

using namespace fresco;

TEST(ForkShortcutsCpu, SameBitsWithTheProjectionForked) {
  std::vector<float> losses[2];
  std::vector<std::pair<std::string, std::vector<float>>> snaps[2];
  for (int fork = 0; fork < 2; ++fork) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.fork_shortcuts(fork != 0);
    t.compile();
    losses[fork] = test::train_small_residual(t, 6);
    snaps[fork] = t.snapshot();
  }
  ASSERT_EQ(losses[0].size(), losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_EQ(losses[0][i], losses[1][i]) << "step " << i;
  EXPECT_NE(losses[0].front(), losses[0].back());  // it really trained
  ASSERT_EQ(snaps[0].size(), snaps[1].size());
  for (size_t i = 0; i < snaps[0].size(); ++i)
    EXPECT_EQ(0, std::memcmp(snaps[0][i].second.data(), snaps[1][i].second.data(),
                             snaps[0][i].second.size() * sizeof(float)))
        << snaps[0][i].first;
}
