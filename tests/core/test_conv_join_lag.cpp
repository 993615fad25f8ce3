// CompileOptions::conv_join_lag_max: conv input gradients over small maps join the side stream with a lag of
// one weight gradient (GraphNode::join_lag, runtime.cpp's finish_capture), and the side stream's operands
// then stay allocated until the join that does wait for them (compiler/memory_planning.cpp,
// fit_feature_lifetimes). The CPU training with it is in tests/e2e/test_conv_join_lag_cpu.cpp; the overlap
// itself is timed on a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
// Split conv backwards over 8x8x8 (two), then 4x4x16 inputs.
BluePrint plain_convs() {
  return seq({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn(), relu(), conv(16, 3, 2, 1), bn(), relu(),
              conv(16, 3, 1, 1), bn(), relu(), gap(), fc(10)});
}

CompiledModel compile(int64_t lag_max) {
  CompileOptions o = test::small_compile_options(8);
  o.conv_join_lag_max = lag_max;
  return Compiler().compile(plain_convs(), o);
}

// The input-gradient conv nodes (part 1) of DEEP_FWD_BWD: per-sample input values -> lagged.
std::map<int64_t, std::vector<bool>> lags_by_input(const CompiledModel& m) {
  std::map<int64_t, std::vector<bool>> out;
  const MemoryPlan& p = m.base_plan();
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
    if (n.op != "conv2d_backward" || n.side_stream) continue;
    EXPECT_TRUE(n.join_side) << n.label;
    const DTensor& x = p.tensor(n.in[1]);
    out[x.shape.h * x.shape.w * x.shape.c].push_back(n.join_lag);
  }
  return out;
}
}  // namespace

TEST(ConvJoinLag, LagsOnlyTheInputGradientsOverSmallMaps) {
  const auto off = lags_by_input(compile(0)), small = lags_by_input(compile(256)),
             all = lags_by_input(compile(1 << 20));
  ASSERT_EQ(off.size(), 2u);  // 8x8x8 inputs (two convs), a 4x4x16 input
  EXPECT_EQ(off.at(512), std::vector<bool>({false, false}));
  EXPECT_EQ(off.at(256), std::vector<bool>({false}));
  EXPECT_EQ(small.at(512), std::vector<bool>({false, false}));
  EXPECT_EQ(small.at(256), std::vector<bool>({true}));
  EXPECT_EQ(all.at(512), std::vector<bool>({true, true}));
  EXPECT_EQ(all.at(256), std::vector<bool>({true}));
}

// A lagged join does not wait for the latest weight gradient, so what that weight gradient reads lives until
// the next join: every feature map lives at least as long as without the lag, and some longer.
TEST(ConvJoinLag, SideStreamOperandsLiveUntilTheJoinThatWaitsForThem) {
  const CompiledModel off = compile(0), lag = compile(1 << 20);
  std::map<std::string, int> end_off;
  for (const DTensor& d : off.base_plan().tensors())
    if (region_family(d.region) == Family::F) end_off[d.name] = d.live_end;
  int longer = 0;
  for (const DTensor& d : lag.base_plan().tensors()) {
    if (region_family(d.region) != Family::F) continue;
    ASSERT_TRUE(end_off.count(d.name)) << d.name;
    EXPECT_GE(d.live_end, end_off[d.name]) << d.name;
    longer += d.live_end > end_off[d.name];
  }
  EXPECT_GT(longer, 0);
}

TEST(ConvJoinLag, RefusesANegativeBound) {
  try {
    compile(-1);
    FAIL() << "a negative conv_join_lag_max compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("conv_join_lag_max"), std::string::npos) << e.what();
  }
}
