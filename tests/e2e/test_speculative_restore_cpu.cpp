// CompileOptions::speculative_update's mechanism on the CPU (e2e/speculative_restore_case.h): an early update
// whose own gradients pass their check is undone by restore_if_skipped when a later check finds an inf
// (weights, buffer and the f16 copy as before the step, the update not counted, the scale halved), and stands
// otherwise. The CUDA twin is in tests/plugins/cuda/test_cuda_speculative_update.cpp.
#include <gtest/gtest.h>

#include "e2e/speculative_restore_case.h"

using namespace fresco;

TEST(SpeculativeRestoreCpu, ALaterOverflowUndoesTheEarlyUpdate) {
  test::expect_restore_outcome(test::run_speculative_restore("cpu", true), true);
}

TEST(SpeculativeRestoreCpu, WithoutAnOverflowTheEarlyUpdateStands) {
  test::expect_restore_outcome(test::run_speculative_restore("cpu", false), false);
}
