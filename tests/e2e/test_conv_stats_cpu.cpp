// Batchnorm statistics from the sums of the conv that writes its input (CompileOptions::conv_stats, ops.h)
// train like the two-pass statistics on the CPU: only the variance's f32 rounding differs (sumsq / n - mean^2
// from f32 sums), so four SGD steps of a residual network agree to about 1e-5 in loss and every weight, and
// the graph really takes that path (sums on every conv read only by its batchnorm).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
struct Trained {
  std::vector<float> losses;
  std::vector<std::pair<std::string, std::vector<float>>> state;
  size_t sums_convs = 0;
};

Trained train(CompileOptions::ConvStats mode) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.conv_stats(mode);
  t.compile();
  Trained r;
  for (GraphId g : {GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD})
    for (const GraphNode& n : t.compiled().train->nodes(g))
      r.sums_convs += n.op == FR_OP_CONV2D && n.out.size() == 2;
  r.losses = test::train_small_residual(t, 4);
  r.state = t.snapshot();
  return r;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0.0 ? num / den : num;
}
}  // namespace

TEST(ConvStatsCpu, StatisticsFromConvSumsTrainLikeTheTwoPassStatistics) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained sums = train(CompileOptions::ConvStats::ON), plain = train(CompileOptions::ConvStats::OFF);
  EXPECT_EQ(sums.sums_convs, 6u);  // every conv: each is read by its bn only
  EXPECT_EQ(plain.sums_convs, 0u);
  ASSERT_EQ(sums.losses.size(), plain.losses.size());
  for (size_t s = 0; s < sums.losses.size(); ++s)
    EXPECT_NEAR(sums.losses[s], plain.losses[s], 1e-5 * std::fabs(plain.losses[s])) << "step " << s;
  ASSERT_EQ(sums.state.size(), plain.state.size());
  for (size_t i = 0; i < sums.state.size(); ++i) {
    EXPECT_EQ(sums.state[i].first, plain.state[i].first);
    EXPECT_LT(max_rel(sums.state[i].second, plain.state[i].second), 1e-4) << sums.state[i].first;
  }
  EXPECT_NE(sums.losses.front(), sums.losses.back());  // it really trained
}
