// A batchnorm applied by the conv that reads it (CompileOptions::conv_prologue, ops.h "Batchnorm prologue")
// trains like the separate apply pass on the CPU: the prologue rounds as fma(x, scale, shift) where the CPU
// batchnorm computes (x - mean) * scale + beta, so four SGD steps of a residual network agree to about 1e-5
// in loss and every weight; the graph really takes the path (each residual block's first batchnorm in its
// statistics-only form, its conv with the four prologue operands, writing the batchnorm's map); with
// grad_sums, the conv's input gradient with the batchnorm gradient epilogue trains the same. A kernel that
// does not declare the forms is refused for them.
#include <gtest/gtest.h>

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
  int stats_only_bn = 0, prologue_convs = 0, epilogue_convs = 0, weights_only_bn = 0, wgrad_prologues = 0;
};

Trained train(CompileOptions::ConvPrologue mode,
              CompileOptions::GradSums sums = CompileOptions::GradSums::AUTO) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.conv_prologue(mode);
  t.grad_sums(sums);
  t.compile();
  Trained r;
  const auto& layers = t.compiled().arch.layers;
  for (GraphId g : {GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD, GraphId::FIRST_LAYER_BWD_A})
    for (const GraphNode& n : t.compiled().train->nodes(g)) {
      r.stats_only_bn += n.op == FR_OP_BATCHNORM && n.out.size() == 2;
      r.weights_only_bn += n.op == FR_OP_BATCHNORM_BACKWARD && n.out.size() == 2;
      const bool bwd8 = n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 8;
      (g == GraphId::FIRST_LAYER_BWD_A ? r.wgrad_prologues : r.epilogue_convs) += bwd8;
      if (n.op != FR_OP_CONV2D || n.in.size() != 6) continue;
      ++r.prologue_convs;
      for (const LayerDescriptor& bn : layers)  // it reads a batchnorm's input and writes its map
        if (bn.applied_by_conv && n.out[1] == bn.out) {
          EXPECT_EQ(n.in[0], layers[static_cast<size_t>(bn.input)].out) << n.label;
          EXPECT_EQ(n.in[2], bn.weight) << n.label;
        }
    }
  r.losses = test::train_small_residual(t, 4);
  r.state = t.snapshot();
  return r;
}
}  // namespace

TEST(ConvPrologueCpu, ABatchnormAppliedByItsConvTrainsLikeTheApplyPass) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained fused = train(CompileOptions::ConvPrologue::ON);
  const Trained plain = train(CompileOptions::ConvPrologue::OFF);
  // the first batchnorm of each of the two residual blocks (relu, then a conv) and the stem's (read by the
  // first block's conv, then by its join)
  EXPECT_EQ(fused.stats_only_bn, 3);
  EXPECT_EQ(fused.prologue_convs, 3);
  EXPECT_EQ(plain.stats_only_bn + plain.prologue_convs, 0);
  // AUTO: fp32 keeps the apply pass
  EXPECT_EQ(train(CompileOptions::ConvPrologue::AUTO).prologue_convs, 0);
  test::expect_same_training(fused.losses, fused.state, plain.losses, plain.state);
}

// With grad_sums the conv that applies a batchnorm only it reads also writes that batchnorm's masked output
// gradient and gradient sums from its input gradient (ops.h, conv2d_backward's batchnorm gradient epilogue):
// each block's first conv here (the stem's batchnorm has two readers), and the training is the same. The
// stem's batchnorm, premasked with its sums, then leaves its dx to the first conv's weight gradient (ops.h,
// the batchnorm gradient prologue).
TEST(ConvPrologueCpu, ItsConvWritesTheBatchnormsGradientSumsAndTrainsTheSame) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained fused = train(CompileOptions::ConvPrologue::ON, CompileOptions::GradSums::ON);
  const Trained plain = train(CompileOptions::ConvPrologue::OFF, CompileOptions::GradSums::OFF);
  EXPECT_EQ(fused.prologue_convs, 3);
  EXPECT_EQ(fused.epilogue_convs, 2);
  EXPECT_EQ(fused.weights_only_bn, 1);
  EXPECT_EQ(fused.wgrad_prologues, 1);
  EXPECT_EQ(plain.epilogue_convs + plain.weights_only_bn + plain.wgrad_prologues, 0);
  test::expect_same_training(fused.losses, fused.state, plain.losses, plain.state);
}

// With fork_shortcuts a projection shortcut that reads the same relu as the main branch's first conv runs
// on the side stream before it, so that conv must not write the batchnorm's map: the stem's batchnorm here
// keeps its apply pass, and the training is the plain one.
TEST(ConvPrologueCpu, AForkedShortcutKeepsItsBatchnorm) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  std::vector<float> losses[2];
  test::Snapshot state[2];
  int prologues = 0;
  for (int k = 0; k < 2; ++k) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.model(
         seq({conv(8, 3, 1, 1), bn(), relu(),
              residual({conv(16, 3, 2, 1), bn(), relu(), conv(16, 3, 1, 1), bn()}, {conv(16, 1, 2, 0), bn()}),
              relu(), gap(), fc(4)}))
        .fork_shortcuts(true)
        .conv_prologue(k == 0 ? CompileOptions::ConvPrologue::ON : CompileOptions::ConvPrologue::OFF);
    t.compile();
    if (k == 0)
      for (const LayerDescriptor& l : t.compiled().arch.layers) prologues += l.prologue_bn >= 0;
    losses[k] = test::train_small_residual(t, 4);
    state[k] = t.snapshot();
  }
  EXPECT_EQ(prologues, 1);  // the block's second conv's, whose relu only it reads
  test::expect_same_training(losses[0], state[0], losses[1], state[1]);
}

// A kernel that does not declare the prologue forms (FR_KERNEL_CONV_PROLOGUE) is refused for a node that uses
// them, never handed operands it would ignore.
TEST(ConvPrologueCpu, AKernelWithoutThePrologueFormsIsRefusedForThem) {
  ASSERT_TRUE(test::load_legacy_conv());
  test::expect_prologue_conv_refused(false, "a conv2d node with a prologue",
                                     {"FR_KERNEL_CONV_PROLOGUE", "conv_prologue"});
}

// The weight gradient's batchnorm prologue and batchnorm_backward's weights-only form (ops.h) are refused on
// kernels that do not declare FR_KERNEL_WGRAD_BN_PROLOGUE.
TEST(ConvPrologueCpu, AKernelWithoutTheWeightGradientPrologueIsRefusedForIt) {
  ASSERT_TRUE(test::load_legacy_conv());
  for (bool conv : {true, false}) {
    auto t = std::make_unique<SimpleTask>("cpu");
    auto map = [&](const char* name, int64_t c) {
      return t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, c}, name);
    };
    auto vec = [&](const char* name, int64_t n) {
      return t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, n}, name);
    };
    const TensorId g = map("g", 8), x = map("x", 8), y = map("y", 8);
    const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{8, 3, 3, 8}, "w");
    const TensorId dw = t->tensor(Region::T_TEMP, DType::F16, Shape{8, 3, 3, 8}, "dw");
    const TensorId gamma = vec("gamma", 8), mean = vec("mean", 8), invstd = vec("invstd", 8),
                   gsums = vec("gsums", 16), dgamma = vec("dgamma", 8), dbeta = vec("dbeta", 8);
    t->lock_memory();
    GraphNode n;
    n.label = conv ? "conv" : "bn";
    if (conv) {
      n.op = FR_OP_CONV2D_BACKWARD;
      n.in = {g, x, w, y, gamma, mean, invstd, gsums};
      n.out = {dw};
      n.with_params(FrConvBackwardParams{FrConvParams{3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, 0, 2});
    } else {
      n.op = FR_OP_BATCHNORM_BACKWARD;
      n.in = {g, y, gamma, mean, invstd, gsums};
      n.out = {dgamma, dbeta};
      n.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
    }
    t->add(GraphId::DEEP_FWD_BWD, n);
    test::expect_refused(*t,
                         conv ? "a weight gradient with the batchnorm prologue" : "a weights-only batchnorm",
                         {"FR_KERNEL_WGRAD_BN_PROLOGUE", "conv_prologue"});
  }
}
