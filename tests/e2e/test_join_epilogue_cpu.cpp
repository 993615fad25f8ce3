// CompileOptions::join_epilogue on the CPU: the masking passes that sum two gradient parts (the stem's relu
// read by the first block's conv and its identity join; the identity block's join read by the projection
// block's convs) go into those convs' input gradients, and the small residual network trains to the same
// bits as with the passes (the CPU's epilogue is add_relu_backward's arithmetic after the convolution).
#include <gtest/gtest.h>

#include "e2e/legacy_conv.h"
#include "e2e/small_residual_task.h"
#include "fresco/core/error.h"

using namespace fresco;

namespace {
// The training graph's add_relu_backward nodes and conv2d_backward nodes with the join epilogue's inputs.
std::pair<int, int> count_nodes(const DeepLearningTask& t) {
  int passes = 0, epilogues = 0;
  for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
    passes += n.op == FR_OP_ADD_RELU_BACKWARD;
    epilogues += n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 6;
  }
  return {passes, epilogues};
}
}  // namespace

TEST(JoinEpilogueCpu, SameBitsWithThePassesInTheInputGradients) {
  using Mode = CompileOptions::JoinEpilogue;
  for (const Mode mode : {Mode::OFF, Mode::ON}) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.grad_sums(CompileOptions::GradSums::ON).join_epilogue(mode);
    t.compile();
    const auto [passes, epilogues] = count_nodes(t);
    EXPECT_EQ(passes, mode == Mode::ON ? 0 : 2);
    EXPECT_EQ(epilogues, mode == Mode::ON ? 2 : 0);
  }
  for (const auto prologue : {CompileOptions::ConvPrologue::OFF, CompileOptions::ConvPrologue::ON}) {
    SCOPED_TRACE(prologue == CompileOptions::ConvPrologue::ON ? "with the conv prologue" : "without it");
    // with the prologue the first block's conv applies the stem's batchnorm and takes the epilogue too (its
    // mask is the applied map it stored)
    test::expect_same_bits(
        [prologue](DeepLearningTask& t) {
          t.grad_sums(CompileOptions::GradSums::ON)
              .conv_prologue(prologue)
              .join_epilogue(CompileOptions::JoinEpilogue::OFF);
        },
        [prologue](DeepLearningTask& t) {
          t.grad_sums(CompileOptions::GradSums::ON)
              .conv_prologue(prologue)
              .join_epilogue(CompileOptions::JoinEpilogue::ON);
        });
  }
}

// AUTO takes it only in mixed precision, on the convs the CUDA backend's own input gradient runs: nowhere in
// this fp32 network.
TEST(JoinEpilogueCpu, AutoIsOffInFp32) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.grad_sums(CompileOptions::GradSums::ON);
  t.compile();
  EXPECT_EQ(count_nodes(t), std::make_pair(2, 0));
}

// ON needs the gradient sums the folded passes carry: without them the compile says so instead of folding
// nothing.
TEST(JoinEpilogueCpu, OnWithoutGradientSumsIsRefused) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.join_epilogue(CompileOptions::JoinEpilogue::ON);  // grad_sums AUTO: off in fp32
  try {
    t.compile();
    ADD_FAILURE() << "join_epilogue ON compiled without grad_sums";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("grad_sums"), std::string::npos) << e.what();
  }
}

// The join epilogue's form (ops.h) is refused on a conv2d_backward kernel that does not declare
// FR_KERNEL_CONV_JOIN_EPILOGUE.
TEST(JoinEpilogueCpu, AKernelWithoutTheFormIsRefusedForIt) {
  ASSERT_TRUE(test::load_legacy_conv());
  auto t = std::make_unique<SimpleTask>("cpu");
  auto map = [&](const char* name) { return t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 8}, name); };
  const TensorId dy = map("dy"), x = map("x"), b = map("b"), bx = map("bx"), dx = map("dx");
  const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{8, 3, 3, 8}, "w");
  const TensorId mean = t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 8}, "mean");
  const TensorId gsums = t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 16}, "gsums");
  t->lock_memory();
  GraphNode n;
  n.op = FR_OP_CONV2D_BACKWARD;
  n.label = "conv";
  n.in = {dy, x, w, b, bx, mean};
  n.out = {dx, gsums};
  n.with_params(FrConvBackwardParams{FrConvParams{3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, 1, 1});
  t->add(GraphId::DEEP_FWD_BWD, n);
  test::expect_refused(*t, "an input gradient with the join epilogue",
                       {"FR_KERNEL_CONV_JOIN_EPILOGUE", "join_epilogue"});
}
