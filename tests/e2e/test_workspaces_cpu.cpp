// Runtime::pre_capture gives each stream one workspace, sized for the calls that run on it: in their own
// capture and in the whole-step captures fused on kFusedStream. Every call that asks for a workspace gets one
// at least as large (finish_capture checks it), and no stream holds more than its largest call asks: the
// workspaces add up to the largest ask on each (before the thirty-third session both computing streams got
// the largest ask of all, 9.9 MiB more for ResNet-18 on the GPU).
#include <gtest/gtest.h>

#include <map>

#include "e2e/small_residual_task.h"
#include "fresco/core/runtime.h"

using namespace fresco;

TEST(WorkspacesCpu, EachStreamHoldsWhatItsLargestCallAsks) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.compile();
  const Runtime& rt = t.runtime();
  std::map<const void*, uint64_t> largest;  // a stream's workspace -> the largest ask of a call using it
  int asking = 0;
  for (size_t i = 0; i < rt.capture_count(); ++i)
    for (const ResolvedCall& rc : rt.capture(static_cast<int>(i)).calls) {
      if (!rc.call.workspace_bytes) continue;
      ++asking;
      ASSERT_NE(rc.call.workspace, nullptr) << rc.label;
      uint64_t& m = largest[rc.call.workspace];
      m = std::max(m, rc.call.workspace_bytes);
    }
  ASSERT_GT(asking, 0);
  EXPECT_GE(largest.size(), 2u);  // the main stream's and the side stream's (weight gradients)
  uint64_t sum = 0;
  for (const auto& [ws, bytes] : largest) sum += bytes;
  EXPECT_EQ(rt.workspace_bytes(), sum);
  // The training still runs on them.
  const std::vector<float> losses = test::train_small_residual(t, 2);
  EXPECT_TRUE(std::isfinite(losses.back()));
}
