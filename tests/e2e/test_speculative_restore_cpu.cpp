// CompileOptions::speculative_update's mechanism on the CPU (e2e/speculative_restore_case.h): an early update
// whose own gradients pass their check is undone by restore_if_skipped when a later check finds an inf
// (weights, buffer and the f16 copy as before the step, the update not counted, the scale halved), one whose
// own gradients overflow skips and is left as it was, and it stands otherwise; with the backups written by
// the update itself and by copy nodes. The CUDA twin is in
// tests/plugins/cuda/test_cuda_speculative_update.cpp.
#include <gtest/gtest.h>

#include <string>

#include "e2e/speculative_restore_case.h"

using namespace fresco;

class SpeculativeRestoreCpu : public testing::TestWithParam<bool> {};  // backups in the update, or copies

TEST_P(SpeculativeRestoreCpu, ALaterOverflowUndoesTheEarlyUpdate) {
  using test::Overflow;
  test::expect_restore_outcome(test::run_speculative_restore("cpu", Overflow::LATE, GetParam()),
                               Overflow::LATE);
}

TEST_P(SpeculativeRestoreCpu, AnOverflowOfItsOwnLeavesThePartAsItWas) {
  using test::Overflow;
  test::expect_restore_outcome(test::run_speculative_restore("cpu", Overflow::EARLY, GetParam()),
                               Overflow::EARLY);
}

TEST_P(SpeculativeRestoreCpu, WithoutAnOverflowTheEarlyUpdateStands) {
  using test::Overflow;
  const test::SpeculativeRestoreRun r = test::run_speculative_restore("cpu", Overflow::NONE, GetParam());
  test::expect_restore_outcome(r, Overflow::NONE);
  const test::SpeculativeRestoreRun other = test::run_speculative_restore("cpu", Overflow::NONE, !GetParam());
  EXPECT_EQ(r.w, other.w);  // the same update either way
  EXPECT_EQ(r.m, other.m);
}

INSTANTIATE_TEST_SUITE_P(Backups, SpeculativeRestoreCpu, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "InUpdate" : "Copies");
                         });
