// CompileOptions::fork_shortcuts changes only which stream a projection shortcut's layers run on (and how
// long their maps are planned): on the CPU, which runs every node in order, the small residual network trains
// to the same bits with its projection forked as without.
#include <gtest/gtest.h>

#include "e2e/small_residual_task.h"

using namespace fresco;

TEST(ForkShortcutsCpu, SameBitsWithTheProjectionForked) {
  test::expect_same_bits([](DeepLearningTask& t) { t.fork_shortcuts(false); },
                         [](DeepLearningTask& t) { t.fork_shortcuts(true); });
}
