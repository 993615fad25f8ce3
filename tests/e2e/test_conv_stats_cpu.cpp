// Batchnorm statistics from the sums of the conv that writes its input (CompileOptions::conv_stats, ops.h)
// train like the two-pass statistics on the CPU: only the variance's f32 rounding differs (sumsq / n - mean^2
// from f32 sums), so four SGD steps of a residual network agree to about 1e-5 in loss and every weight, and
// the graph really takes that path (sums on every conv read only by its batchnorm).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "e2e/legacy_conv.h"
#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"

using namespace fresco;

namespace {
struct Trained {
  std::vector<float> losses;
  test::Snapshot state;
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

}  // namespace

TEST(ConvStatsCpu, StatisticsFromConvSumsTrainLikeTheTwoPassStatistics) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained sums = train(CompileOptions::ConvStats::ON), plain = train(CompileOptions::ConvStats::OFF);
  EXPECT_EQ(sums.sums_convs, 6u);  // every conv: each is read by its bn only
  EXPECT_EQ(plain.sums_convs, 0u);
  test::expect_same_training(sums.losses, sums.state, plain.losses, plain.state);
}

// A kernel that does not declare the sums operands (FrKernelDef::flags, FR_KERNEL_SUMS_OPERANDS: a plugin
// written before they existed) is refused with a clear error for a node that uses them, never handed operands
// it would ignore; the same kernel still serves the plain form.
TEST(ConvStatsCpu, AKernelWithoutTheSumsOperandsIsRefusedForThem) {
  ASSERT_TRUE(test::load_legacy_conv());
  auto conv_task = [](bool sums) {
    auto t = std::make_unique<SimpleTask>("cpu");
    const TensorId x = t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 8}, "x");
    const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{8, 3, 3, 8}, "w");
    const TensorId y = t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 8}, "y");
    const TensorId s = t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 16}, "sums");
    t->lock_memory();
    GraphNode n;
    n.op = FR_OP_CONV2D;
    n.label = "conv";
    n.in = {x, w};
    n.out = {y};
    if (sums) n.out.push_back(s);
    n.with_params(FrConvParams{3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
    t->add(GraphId::DEEP_FWD_BWD, n);
    return t;
  };
  // the flag, the plugin and the way out named
  test::expect_refused(*conv_task(true), "a conv2d node with sums",
                       {"FR_KERNEL_SUMS_OPERANDS", "legacy_conv", "conv_stats"});
  EXPECT_NO_THROW(conv_task(false)->compile());
}
