// CompileOptions::speculative_update's mechanism on the CPU (e2e/speculative_restore_case.h): an early update
// whose own gradients pass their check is undone by restore_if_skipped when a later check finds an inf
// (weights, buffer and the f16 copy as before the step, the update not counted, the scale halved), and stands
// otherwise. The CUDA twin is in tests/plugins/cuda/test_cuda_speculative_update.cpp.
#include <gtest/gtest.h>

#include "e2e/speculative_restore_case.h"

using namespace fresco;

TEST(SpeculativeRestoreCpu, ALaterOverflowUndoesTheEarlyUpdate) {
  const test::SpeculativeRestoreRun r = test::run_speculative_restore("cpu", true);
  EXPECT_EQ(r.w, r.w0);
  EXPECT_EQ(r.m, r.m0);
  EXPECT_EQ(r.copy, r.copy_of_w);
  EXPECT_EQ(r.s.updates, 0);
  EXPECT_EQ(r.s.loss_scale, 512.0f);
  EXPECT_EQ(r.s.skip_step, 0);  // cleared by step_done
}

TEST(SpeculativeRestoreCpu, WithoutAnOverflowTheEarlyUpdateStands) {
  const test::SpeculativeRestoreRun r = test::run_speculative_restore("cpu", false);
  EXPECT_NE(r.w, r.w0);
  EXPECT_NE(r.m, r.m0);
  EXPECT_EQ(r.copy, r.copy_of_w);
  EXPECT_EQ(r.s.updates, 1);
  EXPECT_EQ(r.s.loss_scale, 1024.0f);
}
