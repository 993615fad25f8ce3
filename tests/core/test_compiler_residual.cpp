// Residual blocks in the Compiler: the block flattens to main branch, shortcut branch and an add join; a
// tensor read by two consumers gets its gradient summed; mismatched branch shapes are one kBadConfig error.
// Numerics are checked end to end by Golden.ResnetSgdFirstTwoSteps.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
CompileOptions cnn_options() {
  return test::small_compile_options(8);
}

size_t count_nodes(const CompiledModel& m, const std::string& op) {
  size_t n = 0;
  for (int g = 0; g < kGraphIdCount; ++g)
    for (const GraphNode& node : m.train->nodes(static_cast<GraphId>(g))) n += node.op == op ? 1 : 0;
  return n;
}
}  // namespace

TEST(CompilerResidual, IdentityAndProjectionBlocksAddAndSumGradients) {
  Compiler c;
  const BluePrint bp = seq({conv(4, 3, 1, 1), relu(), residual({conv(4, 3, 1, 1), bn(), relu()}),
                            residual({conv(8, 3, 2, 1), bn()}, {conv(8, 1, 2, 0), bn()}), gap(), fc(10)});
  // Two joins forward, and backward one gradient sum per block input (read by both of its branches); the
  // second join computes its main branch's bn (batchnorm_add) unless fuse_joins is off.
  const CompiledModel m = c.compile(bp, cnn_options());
  EXPECT_EQ(count_nodes(m, "add"), 3u);
  EXPECT_EQ(count_nodes(m, "batchnorm_add"), 1u);
  CompileOptions unfused = cnn_options();
  unfused.fuse_joins = false;
  const CompiledModel u = c.compile(bp, unfused);
  EXPECT_EQ(count_nodes(u, "add"), 4u);
  EXPECT_EQ(count_nodes(u, "batchnorm_add"), 0u);
}

// A bn that only a residual join reads is computed by the join in training: one batchnorm_add node reads the
// bn's input, gamma, beta and the other branch and writes the join's output (relu of the join fused); the bn
// emits no forward node of its own, keeps its backward (no relu input: its gradient is the join's masked
// one), and inference still runs every bn in the folded form.
TEST(CompilerResidual, BatchNormReadOnlyByAJoinIsComputedByIt) {
  Compiler c;
  const CompiledModel m =
      c.compile(seq({conv(4, 3, 1, 1), bn(), relu(), residual({conv(4, 3, 1, 1), bn()}), relu(),
                     residual({conv(8, 3, 2, 1), bn()}, {conv(8, 1, 2, 0), bn()}), relu(), gap(), fc(10)}),
                cnn_options());
  EXPECT_EQ(count_nodes(m, "batchnorm_add"), 2u);
  EXPECT_EQ(count_nodes(m, "batchnorm"), 2u);  // the stem's (relu fused) and the projection shortcut's
  EXPECT_EQ(count_nodes(m, "add_relu"), 0u);
  EXPECT_EQ(count_nodes(m, "batchnorm_backward"), 4u);
  size_t joins = 0;
  for (const auto& l : m.arch.layers) {
    if (l.kind != LayerKind::ADD) continue;
    ASSERT_GE(l.join_bn, 0) << l.name;
    const LayerDescriptor& b = m.arch.layers[static_cast<size_t>(l.join_bn)];
    EXPECT_EQ(l.join_bn, l.input) << l.name << ": the main branch's bn";
    EXPECT_TRUE(b.fused_into_join);
    const TensorId other = m.arch.layers[static_cast<size_t>(l.input2)].out;
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
      if (n.op == "batchnorm_add" && n.out[0] == l.out) {
        ++joins;
        ASSERT_EQ(n.in.size(), 4u);
        EXPECT_EQ(n.in[0], m.arch.layers[static_cast<size_t>(b.input)].out);
        EXPECT_EQ(n.in[3], other);
        FrBatchNormParams p{};
        ASSERT_EQ(n.params.size(), sizeof p);
        std::memcpy(&p, n.params.data(), sizeof p);
        EXPECT_EQ(p.relu, 1);
      }
      if (n.op == "batchnorm_backward" && n.label == b.name) {
        EXPECT_EQ(n.in.size(), 5u) << b.name;
      }
      for (TensorId t : n.in) EXPECT_NE(t, b.out) << n.op << " reads the fused bn's output";
    }
  }
  EXPECT_EQ(joins, 2u);
  size_t affine = 0;
  for (const GraphNode& n : m.inference->nodes(GraphId::INF_MAIN_A))
    affine += n.op == "channel_affine" ? 1 : 0;
  EXPECT_EQ(affine, 4u);
}

TEST(CompilerResidual, MismatchedBranchesAreOneClearError) {
  Compiler c;
  try {
    c.compile(seq({conv(4, 3, 1, 1), residual({conv(8, 3, 1, 1)}), gap(), fc(10)}), cnn_options());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("layer 1 (residual)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("add a projection shortcut"), std::string::npos) << e.what();
  }
}

// bn -> relu and residual join -> relu are fused: no relu node is left in forward; each join's relu backward
// is one relu_backward node whose result both branches read; each fused bn's backward gets the relu output.
TEST(CompilerResidual, ReluAfterBatchNormAndJoinsIsFused) {
  Compiler c;
  const CompiledModel m =
      c.compile(seq({conv(4, 3, 1, 1), bn(), relu(), residual({conv(4, 3, 1, 1), bn(), relu()}), relu(),
                     residual({conv(8, 3, 2, 1), bn()}, {conv(8, 1, 2, 0), bn()}), relu(), gap(), fc(10)}),
                cnn_options());
  EXPECT_EQ(count_nodes(m, "relu"), 0u);
  EXPECT_EQ(count_nodes(m, "add_relu"), 1u);
  EXPECT_EQ(count_nodes(m, "batchnorm_add"), 1u);  // the second join, with its relu
  // The first join's output feeds both branches of the next block: its two gradient parts are summed and
  // masked by one add_relu_backward (no gradient-sum add); the second join's has one reader.
  EXPECT_EQ(count_nodes(m, "relu_backward"), 1u);
  EXPECT_EQ(count_nodes(m, "add_relu_backward"), 1u);
  EXPECT_EQ(count_nodes(m, "add"), 1u);  // the stem's output, read by both branches of the first block
  size_t fused_bn_backward = 0;
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD))
    if (n.op == "batchnorm_backward") fused_bn_backward += n.in.size() == 7 ? 1 : 0;
  EXPECT_EQ(fused_bn_backward, 2u);  // the stem's bn is in DEEP too (the first layer graph holds only conv0)
}

// A concat block joins the channels of its branches (main's first): the output has both channel counts, the
// forward emits one concat node and the backward one concat_backward that writes a gradient for each branch.
TEST(CompilerResidual, ConcatBlocksJoinChannelsAndSplitGradients) {
  Compiler c;
  const CompiledModel m = c.compile(seq({cbr(4, 3)[0], cbr(4, 3)[1], cbr(4, 3)[2],
                                         concat({conv(6, 3, 1, 1), bn(), relu()}), gap(), fc(10)}),
                                    cnn_options());
  const LayerDescriptor* join = nullptr;
  for (const auto& l : m.arch.layers)
    if (l.kind == LayerKind::CONCAT) join = &l;
  ASSERT_NE(join, nullptr);
  EXPECT_EQ(join->out_sample.c, 10);  // 6 from the main branch + 4 from the identity branch
  EXPECT_EQ(count_nodes(m, "concat"), 1u);
  EXPECT_EQ(count_nodes(m, "concat_backward"), 1u);
  ASSERT_NE(join->grad_in2, kNoTensor);
  // the identity branch's gradient and the main branch's both flow into the block input: summed there
  EXPECT_EQ(count_nodes(m, "add"), 1u);
  try {
    c.compile(seq({conv(4, 3, 1, 1), concat({conv(4, 3, 2, 1)}), gap(), fc(10)}), cnn_options());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concat needs the same height and width"), std::string::npos)
        << e.what();
  }
}

// Inference runs batchnorm in its folded form: UPDATE_BN_INF_PARAMS folds each bn's gamma, beta and running
// statistics into a per-channel scale and shift once, and the inference forward applies them (fused relu
// kept).
TEST(CompilerResidual, InferenceUsesTheFoldedBatchNorm) {
  Compiler c;
  const BluePrint bp =
      seq({conv(4, 3, 1, 1), bn(), relu(), residual({conv(4, 3, 1, 1), bn()}), gap(), fc(10)});
  const CompiledModel m = c.compile(bp, cnn_options());
  const auto& fold = m.inference->nodes(GraphId::UPDATE_BN_INF_PARAMS);
  ASSERT_EQ(fold.size(), 2u);
  size_t affine = 0, bn_nodes = 0;
  for (GraphId g : {GraphId::INF_MAIN_A, GraphId::INF_MAIN_B})
    for (const GraphNode& n : m.inference->nodes(g)) {
      affine += n.op == "channel_affine" ? 1 : 0;
      bn_nodes += n.op == "batchnorm" ? 1 : 0;
    }
  EXPECT_EQ(affine, 4u);  // two bn layers, in each of the two inference graphs
  EXPECT_EQ(bn_nodes, 0u);
  for (const auto& l : m.arch.layers) {
    if (l.kind != LayerKind::BN) continue;
    bool folded = false;
    for (const GraphNode& n : fold)
      folded |= n.op == "batchnorm_fold" && n.in.size() == 4 && n.in[2] == l.running_mean &&
                n.out == std::vector<TensorId>{l.bn_scale, l.bn_shift};
    EXPECT_TRUE(folded) << l.name;
    EXPECT_EQ(m.base_plan().tensor(l.bn_scale).region, Region::B_BN_STATS);
  }
}

// CompileOptions::conv_stats: a training bn whose input is a bias-free conv read by nothing else takes its
// statistics from the conv's sums (the conv2d node's second output, the bn's fourth input, batchnorm_add's
// fifth; one f32 [2C] tensor); AUTO turns it on in mixed precision only, on the convs the CUDA backend's own
// kernels run; a conv with a bias or with two readers keeps the bn's own statistics; inference
// convs write no sums.
TEST(CompilerResidual, BatchNormTakesItsStatisticsFromTheConvSums) {
  Compiler c;
  const BluePrint bp =
      seq({conv(4, 3, 1, 1), bn(), relu(), residual({conv(4, 3, 1, 1), bn()}), relu(),
           residual({conv(8, 3, 2, 1, true), bn()}, {conv(8, 1, 2, 0), bn()}), relu(), gap(), fc(10)});
  auto sums_nodes = [](const CompiledModel& m, size_t* convs, size_t* bns) {
    std::set<std::string> cs, bs;  // by layer (the first layer's forward is in the A and the B graph)
    for (int g = 0; g < kGraphIdCount; ++g)
      for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g))) {
        if (n.op == "conv2d" && n.out.size() == 2) cs.insert(n.label);
        if ((n.op == "batchnorm" && n.in.size() == 4) || (n.op == "batchnorm_add" && n.in.size() == 5))
          bs.insert(n.label);
      }
    *convs = cs.size();
    *bns = bs.size();
  };
  size_t convs = 0, bns = 0;
  CompileOptions on = cnn_options();
  on.conv_stats = CompileOptions::ConvStats::ON;
  const CompiledModel m = c.compile(bp, on);
  sums_nodes(m, &convs, &bns);
  EXPECT_EQ(convs, 3u);  // not the conv with a bias
  EXPECT_EQ(bns, 3u);
  for (const auto& l : m.arch.layers) {
    if (l.kind != LayerKind::BN) continue;
    const LayerDescriptor& in = m.arch.layers[static_cast<size_t>(l.input)];
    EXPECT_EQ(l.reads_sums, !in.spec.bias) << l.name;
    EXPECT_EQ(in.writes_sums, l.reads_sums) << in.name;
    if (!l.reads_sums) continue;
    EXPECT_EQ(l.sums, in.sums);
    EXPECT_EQ(m.base_plan().tensor(l.sums).dtype, DType::F32);
    EXPECT_EQ(m.base_plan().tensor(l.sums).shape.numel(), 2 * l.in_sample.c);
    for (int g = 0; g < kGraphIdCount; ++g)
      for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g))) {
        if (n.op == "conv2d" && n.label == in.name) {
          EXPECT_EQ(n.out.back(), l.sums);
        }
        if ((n.op == "batchnorm" || n.op == "batchnorm_add") && n.label == l.name) {
          EXPECT_EQ(n.in.back(), l.sums) << n.op;
        }
      }
  }
  for (const GraphNode& n : m.inference->nodes(GraphId::INF_MAIN_A)) {
    if (n.op == "conv2d") {
      EXPECT_EQ(n.out.size(), 1u) << n.label;
    }
  }
  CompileOptions fp32 = cnn_options();  // AUTO
  sums_nodes(c.compile(bp, fp32), &convs, &bns);
  EXPECT_EQ(convs + bns, 0u);
  // AUTO in fp16 and bf16: only the convs the CUDA backend's own kernels run (a narrow stem of at most 32
  // taps and 16 / 32 / 64 outputs; the Hopper shape, 3x3 64 -> 64 on maps 32 wide), not the 16 -> 16 conv
  // after it (cuDNN's fp16 fused statistics are not deterministic).
  CompileOptions bf16 = cnn_options();
  bf16.precision = DType::BF16;
  const BluePrint narrow_then_wide =
      seq({conv(16, 3, 1, 1), bn(), relu(), residual({conv(16, 3, 1, 1), bn()}), relu(), gap(), fc(10)});
  for (DType low : {DType::F16, DType::BF16}) {
    CompileOptions o = bf16;
    o.precision = low;
    sums_nodes(c.compile(narrow_then_wide, o), &convs, &bns);
    EXPECT_EQ(convs, 1u) << dtype_name(low);
    EXPECT_EQ(bns, 1u) << dtype_name(low);
  }
  CompileOptions hopper = bf16;
  hopper.input_sample = Shape{1, 32, 32, 1};  // a narrow stem to 64 channels, then the Hopper shape
  const CompiledModel h = c.compile(
      seq({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn(), relu(), gap(), fc(10)}), hopper);
  size_t writers = 0, readers = 0;  // (the nodes take conv_prologue's forms here: count the layers)
  for (const auto& l : h.arch.layers) writers += l.writes_sums, readers += l.reads_sums;
  EXPECT_EQ(writers, 2u);
  EXPECT_EQ(readers, 2u);
  bf16.conv_stats = CompileOptions::ConvStats::ON;
  sums_nodes(c.compile(narrow_then_wide, bf16), &convs, &bns);
  EXPECT_EQ(convs, 2u);
  EXPECT_EQ(bns, 2u);
  CompileOptions off = on;
  off.conv_stats = CompileOptions::ConvStats::OFF;
  sums_nodes(c.compile(bp, off), &convs, &bns);
  EXPECT_EQ(convs + bns, 0u);
  // a conv read by its bn and by a join keeps the bn's own statistics
  sums_nodes(
      c.compile(seq({conv(4, 3, 1, 1), residual({bn(), relu(), conv(4, 3, 1, 1)}), gap(), fc(10)}), on),
      &convs, &bns);
  EXPECT_EQ(convs + bns, 0u);
}
