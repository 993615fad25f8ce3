// CompileOptions::compact_shortcut_grads on the CPU: the projection block's 1x1 stride-2 shortcut writes its
// input gradient at its output positions only ([N, P, Q, C], ops.h), the join's add_relu_backward adds it
// there, and the small residual network trains to the same bits as with the full-size part (the CPU's
// compact part is the GEMM whose values col2im would copy to those positions, and the other positions add
// +0 as the full-size part's zeros did).
#include <gtest/gtest.h>

#include <cmath>

#include "e2e/legacy_conv.h"
#include "e2e/small_residual_task.h"
#include "fresco/core/error.h"

using namespace fresco;

namespace {
using Mode = CompileOptions::CompactShortcutGrads;

// The training graph's add_relu_backward nodes with a compact part: (count, the part's elements per the
// first part's).
std::pair<int, double> compact_passes(const DeepLearningTask& t) {
  const MemoryPlan& p = t.compiled().base_plan();
  int count = 0;
  double ratio = 0.0;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
    if (n.op != FR_OP_ADD_RELU_BACKWARD || n.params.empty()) continue;
    const auto s = n.params_as<FrAddReluBackwardParams>();
    EXPECT_TRUE(s && s->stride_h == 2 && s->stride_w == 2);
    ++count;
    ratio = static_cast<double>(p.tensor(n.in[1]).shape.numel()) /
            static_cast<double>(p.tensor(n.in[0]).shape.numel());
  }
  return {count, ratio};
}
}  // namespace

TEST(CompactShortcutCpu, TheShortcutsPartIsAQuarterAndTheBitsAreTheSame) {
  for (const Mode mode : {Mode::OFF, Mode::ON}) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.compact_shortcut_grads(mode);
    t.compile();
    const auto [count, ratio] = compact_passes(t);
    EXPECT_EQ(count, mode == Mode::ON ? 1 : 0);
    if (mode == Mode::ON) {
      EXPECT_DOUBLE_EQ(ratio, 0.25);  // 8x8 -> 4x4 positions, the same 8 channels
    }
  }
  for (const auto sums : {CompileOptions::GradSums::OFF, CompileOptions::GradSums::ON}) {
    SCOPED_TRACE(sums == CompileOptions::GradSums::ON ? "with gradient sums" : "without them");
    test::expect_same_bits(
        [sums](DeepLearningTask& t) { t.grad_sums(sums).compact_shortcut_grads(Mode::OFF); },
        [sums](DeepLearningTask& t) { t.grad_sums(sums).compact_shortcut_grads(Mode::ON); });
  }
}

// AUTO takes it in mixed precision only; a join whose masking pass a conv's join epilogue does keeps the
// full-size part (that epilogue reads it whole).
TEST(CompactShortcutCpu, WhereItIsNotTaken) {
  {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.compile();
    EXPECT_EQ(compact_passes(t).first, 0);
  }
  {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.grad_sums(CompileOptions::GradSums::ON)
        .join_epilogue(CompileOptions::JoinEpilogue::ON)
        .compact_shortcut_grads(Mode::ON);
    t.compile();
    EXPECT_EQ(compact_passes(t).first, 0);
  }
}

// The compact input gradient (ops.h) is refused on a conv2d_backward kernel that does not declare
// FR_KERNEL_COMPACT_GRAD.
TEST(CompactShortcutCpu, AKernelWithoutTheFormIsRefusedForIt) {
  ASSERT_TRUE(test::load_legacy_conv());
  auto t = std::make_unique<SimpleTask>("cpu");
  const TensorId dy = t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 16}, "dy");
  const TensorId x = t->tensor(Region::T_TEMP, DType::F16, Shape{2, 8, 8, 8}, "x");
  const TensorId dx = t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 8}, "dx");
  const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{16, 1, 1, 8}, "w");
  t->lock_memory();
  GraphNode n;
  n.op = FR_OP_CONV2D_BACKWARD;
  n.label = "shortcut";
  n.in = {dy, x, w};
  n.out = {dx};
  n.with_params(FrConvBackwardParams{FrConvParams{1, 1, 2, 2, 0, 0, 1, 1, 1, 0}, 1, 1});
  t->add(GraphId::DEEP_FWD_BWD, n);
  test::expect_refused(*t, "a compact input gradient", {"FR_KERNEL_COMPACT_GRAD", "compact_shortcut_grads"});
}

// With progressive resolution each shape variant plans its own compact part: the begin stage at 7 x 7 (the
// shortcut reads rows and columns 0, 2, 4 and 6 of the projection block's 7 x 7 input: a 4 x 4 part) and the
// end stage at the data's 8 x 8 (also 4 x 4, from rows 0, 2, 4, 6 of 8); both stages train and the
// evaluation at 8 x 8 runs.
TEST(CompactShortcutCpu, EachResolutionStageHasItsOwnCompactPart) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  ProgressiveResolution p;
  p.begin_h = p.begin_w = 7;
  p.end_h = p.end_w = 8;
  p.begin_epochs = 1;
  t.epochs(2).progressive_resolution(p).compact_shortcut_grads(Mode::ON);
  t.compile();
  EXPECT_EQ(compact_passes(t).first, 1);
  const TrainingResult r = t.run(2);
  ASSERT_EQ(r.epochs.size(), 2u);
  for (const auto& e : r.epochs) EXPECT_TRUE(std::isfinite(e.train_loss)) << e.train_loss;
  EXPECT_EQ(t.evaluate().samples, 16);
}

// CompileOptions::subsampled_shortcuts: the projection block's join (batchnorm_add) also writes its output's
// even rows and columns, the shortcut reads them at stride 1 in training, and the network trains as with the
// strided shortcut, within the CPU's rounding (a 1x1 conv at stride 1 runs as one GEMM over the map, at
// stride 2 per block of images); the inference graph keeps the strided shortcut on the full map.
TEST(CompactShortcutCpu, TheShortcutReadsItsJoinsSubsampledOutput) {
  using Sub = CompileOptions::SubsampledShortcuts;
  std::vector<float> want_losses;
  test::Snapshot want;
  for (const Sub mode : {Sub::OFF, Sub::ON}) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.compact_shortcut_grads(Mode::ON).subsampled_shortcuts(mode);
    t.compile();
    int outputs = 0, strided = 0;
    for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
      outputs += n.op == FR_OP_BATCHNORM_ADD && n.out.size() == 4;
      if (n.op == FR_OP_CONV2D && n.params_as<FrConvParams>()->kh == 1)
        strided += n.params_as<FrConvParams>()->stride_h == 2;
    }
    EXPECT_EQ(outputs, mode == Sub::ON ? 1 : 0);
    EXPECT_EQ(strided, mode == Sub::ON ? 0 : 1);
    const std::vector<float> losses = test::train_small_residual(t, 6);
    const test::Snapshot state = t.snapshot();
    EXPECT_GT(t.evaluate().samples, 0);  // the inference graph's strided shortcut
    if (mode == Sub::OFF) {
      want_losses = losses, want = state;
      continue;
    }
    test::expect_same_training(losses, state, want_losses, want);
  }
}

// ON that cannot be taken is refused at compile, naming the option to set: subsampled_shortcuts needs the
// compact part (compact_shortcut_grads AUTO is off in fp32).
TEST(CompactShortcutCpu, SubsampledOnWithoutTheCompactPartIsRefused) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.subsampled_shortcuts(CompileOptions::SubsampledShortcuts::ON);
  try {
    t.compile();
    ADD_FAILURE() << "subsampled_shortcuts ON compiled without the compact part";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("compact_shortcut_grads"), std::string::npos) << e.what();
  }
}
