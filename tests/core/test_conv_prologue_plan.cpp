// CompileOptions::conv_prologue in the Compiler: AUTO applies it in mixed precision to exactly the convs of
// ResNet-18's CIFAR stage 1 that first read a batchnorm + relu (the stem's, also read by the first join's
// shortcut, and each block's first: 3), which then read the batchnorm's input and write its map; none in
// fp32 or with OFF; ON everywhere the pattern occurs (the stem's and every block's first batchnorm: 9). With
// grad_sums (AUTO: mixed precision) each such conv that is its batchnorm's only reader (not the stem's) also
// writes the batchnorm's masked gradient and gradient sums from its input gradient (2 in stage 1, 8 with ON),
// and that batchnorm's backward takes them. The kernels' numerics: tests/plugins/cpu/test_conv_prologue.cpp,
// tests/e2e/test_conv_prologue_cpu.cpp and, on a GPU, tests/plugins/cuda/test_cuda_low_precision.cpp.
#include <gtest/gtest.h>

#include "fresco/core/compiler.h"
#include "fresco/core/models.h"
#include "fresco/ops.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
struct Count {
  int convs = 0, applied = 0, epilogues = 0;
};

Count compile(DType precision, CompileOptions::ConvPrologue mode,
              CompileOptions::GradSums sums = CompileOptions::GradSums::AUTO) {
  CompileOptions o = test::rgb_compile_options(32, 8);
  o.precision = precision;
  o.conv_prologue = mode;
  o.grad_sums = sums;
  const CompiledModel m = Compiler().compile(models::resnet18(10), o);
  Count c;
  for (const LayerDescriptor& l : m.arch.layers) {
    if (l.prologue_bn < 0) continue;
    ++c.convs;
    const LayerDescriptor& bn = m.arch.layers[static_cast<size_t>(l.prologue_bn)];
    EXPECT_TRUE(bn.applied_by_conv);
    EXPECT_EQ(l.prologue_input, m.arch.layers[static_cast<size_t>(bn.input)].out) << l.name;
    int nodes = 0;  // the conv's forward: the batchnorm's input in, its map out beside y
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD))
      if (n.op == FR_OP_CONV2D && n.label == l.name) {
        ++nodes;
        if (n.in.size() != 6u || n.out.size() < 2u) {
          ADD_FAILURE() << l.name << ": " << n.in.size() << " inputs, " << n.out.size() << " outputs";
          continue;
        }
        EXPECT_EQ(n.in[0], l.prologue_input);
        EXPECT_EQ(n.out[1], bn.out);
      }
    EXPECT_EQ(nodes, 1) << l.name;
    if (l.grad_sums_bn < 0) continue;  // the gradient epilogue: bx and the four in, gsums out last
    ++c.epilogues;
    EXPECT_EQ(l.grad_sums_bn, l.prologue_bn);
    EXPECT_TRUE(bn.grad_premasked);
    int backward = 0, bn_backward = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
      if (n.op == FR_OP_CONV2D_BACKWARD && n.label == l.name && n.in.size() == 8u) {
        ++backward;
        EXPECT_EQ(n.in[3], l.prologue_input);
        EXPECT_EQ(n.out.back(), bn.grad_sums);
      }
      if (n.op == FR_OP_BATCHNORM_BACKWARD && n.label == bn.name) {
        ++bn_backward;
        EXPECT_EQ(n.in.size(), 6u) << bn.name << ": dy premasked, with gsums";
        if (n.in.size() == 6u) {
          EXPECT_EQ(n.in[5], bn.grad_sums);
        }
      }
    }
    EXPECT_EQ(backward, 1) << l.name;
    EXPECT_EQ(bn_backward, 1) << bn.name;
  }
  for (const LayerDescriptor& l : m.arch.layers) c.applied += l.applied_by_conv;
  return c;
}
}  // namespace

TEST(ConvProloguePlan, AutoFusesResnet18Stage1InMixedPrecision) {
  const Count bf16 = compile(DType::BF16, CompileOptions::ConvPrologue::AUTO);
  EXPECT_EQ(bf16.convs, 3);
  EXPECT_EQ(bf16.applied, 3);
  EXPECT_EQ(compile(DType::BF16, CompileOptions::ConvPrologue::OFF).convs, 0);
  EXPECT_EQ(compile(DType::F16, CompileOptions::ConvPrologue::AUTO).convs, 3);
  EXPECT_EQ(compile(DType::F32, CompileOptions::ConvPrologue::AUTO).convs, 0);
  const Count on = compile(DType::F32, CompileOptions::ConvPrologue::ON);
  EXPECT_EQ(on.convs, 9);
  EXPECT_EQ(on.applied, 9);
  EXPECT_EQ(on.epilogues, 0);  // grad_sums AUTO: mixed precision only
}

TEST(ConvProloguePlan, ItsConvWritesTheBatchnormsGradientSums) {
  EXPECT_EQ(compile(DType::BF16, CompileOptions::ConvPrologue::AUTO).epilogues, 2);
  EXPECT_EQ(compile(DType::F16, CompileOptions::ConvPrologue::AUTO).epilogues, 2);
  EXPECT_EQ(compile(DType::BF16, CompileOptions::ConvPrologue::AUTO, CompileOptions::GradSums::OFF).epilogues,
            0);
  EXPECT_EQ(compile(DType::F32, CompileOptions::ConvPrologue::ON, CompileOptions::GradSums::ON).epilogues, 8);
}

// The fused head masks its input gradient only when that input is the fused relu output of the fc before
// it: a batchnorm whose gradient the epilogue premasks elsewhere must not turn the mask on (an fc without
// relu between: its input gradient is not masked).
TEST(ConvProloguePlan, TheHeadMasksOnlyAReluFcInput) {
  for (bool relu_fc : {false, true}) {
    CompileOptions o = test::rgb_compile_options(32, 8);
    o.precision = DType::BF16;
    const BluePrint model = relu_fc ? seq({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn(), relu(),
                                           conv(64, 3, 1, 1), bn(), relu(), gap(), fc(16), relu(), fc(10)})
                                    : seq({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn(), relu(),
                                           conv(64, 3, 1, 1), bn(), relu(), gap(), fc(16), fc(10)});
    const CompiledModel m = Compiler().compile(model, o);
    int epilogues = 0, heads = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
      epilogues += n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 8;
      if (n.op != FR_OP_FC_SOFTMAX_XENT) continue;
      ++heads;
      const auto p = n.params_as<FrFcSoftmaxXentParams>();
      ASSERT_TRUE(p.has_value());
      EXPECT_EQ(p->mask_input, relu_fc ? 1 : 0) << (relu_fc ? "fc + relu before the head" : "plain fc");
    }
    EXPECT_GE(epilogues, 1);  // a premasked batchnorm exists
    EXPECT_EQ(heads, 1);
  }
}

// With grad_sums the first conv's weight gradient applies the backward of the batchnorm that alone reads its
// output when that batchnorm gets its gradient premasked with its sums (ResNet-18's stem: its relu is read
// by the first block's conv and shortcut): AUTO in mixed precision on a narrow input, ON anywhere. The
// batchnorm's backward then writes only dgamma and dbeta, the conv's takes the batchnorm's output gradient,
// y, gamma, save_mean, save_invstd and gsums, and the batchnorm's dx is never planned.
TEST(ConvProloguePlan, TheFirstConvsWeightGradientAppliesItsBatchnormsBackward) {
  struct Case {
    DType precision;
    CompileOptions::ConvPrologue mode;
    CompileOptions::GradSums sums;
    bool fused;
  };
  using P = CompileOptions::ConvPrologue;
  using S = CompileOptions::GradSums;
  for (const Case& k : {Case{DType::BF16, P::AUTO, S::AUTO, true}, Case{DType::F16, P::AUTO, S::AUTO, true},
                        Case{DType::F32, P::AUTO, S::AUTO, false}, Case{DType::BF16, P::OFF, S::AUTO, false},
                        Case{DType::BF16, P::AUTO, S::OFF, false}, Case{DType::F32, P::ON, S::ON, true}}) {
    CompileOptions o = test::rgb_compile_options(32, 8);
    o.precision = k.precision;
    o.conv_prologue = k.mode;
    o.grad_sums = k.sums;
    const CompiledModel m = Compiler().compile(models::resnet18(10), o);
    const LayerDescriptor& conv = m.arch.layers[0];
    const LayerDescriptor& bn = m.arch.layers[1];
    ASSERT_TRUE(conv.first_param_layer && conv.kind == LayerKind::CONV && bn.kind == LayerKind::BN);
    const std::string what = std::string(dtype_name(k.precision)) + " mode " +
                             std::to_string(static_cast<int>(k.mode)) + " sums " +
                             std::to_string(static_cast<int>(k.sums));
    EXPECT_EQ(conv.wgrad_prologue_bn >= 0, k.fused) << what;
    EXPECT_EQ(bn.dx_by_conv, k.fused) << what;
    EXPECT_EQ(bn.grad_in == kNoTensor, k.fused)
        << what << ": the batchnorm's dx is planned only when written";
    int conv_backward = 0, bn_backward = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::FIRST_LAYER_BWD_A)) {
      if (n.op != FR_OP_CONV2D_BACKWARD) continue;
      ++conv_backward;
      ASSERT_EQ(n.in.size(), k.fused ? 8u : 3u) << what;
      if (!k.fused) continue;
      EXPECT_EQ(n.in[0], bn.grad_out);
      EXPECT_EQ(n.in[3], conv.out);
      EXPECT_EQ(n.in[4], bn.weight);
      EXPECT_EQ(n.in[5], bn.save_mean);
      EXPECT_EQ(n.in[6], bn.save_invstd);
      EXPECT_EQ(n.in[7], bn.grad_sums);
    }
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD))
      if (n.op == FR_OP_BATCHNORM_BACKWARD && n.label == bn.name) {
        ++bn_backward;
        EXPECT_EQ(n.out.size(), k.fused ? 2u : 3u) << what;
      }
    EXPECT_EQ(conv_backward, 1) << what;
    EXPECT_EQ(bn_backward, 1) << what;
  }
}

// The gamma that the first conv's weight gradient reads (its batchnorm's backward, applied there) is read
// after DEEP_FWD_BWD, so the early update (bf16, AUTO) must not update it on the side stream at the end of
// DEEP_FWD_BWD: with the no-decay group of its own (no_decay_1d) it is updated in OPTIMIZER with the first
// layer's parameters, and no update of DEEP_FWD_BWD writes it.
TEST(ConvProloguePlan, TheGammaItsWeightGradientReadsIsNotUpdatedEarly) {
  for (bool no_decay : {false, true}) {
    CompileOptions o = test::rgb_compile_options(32, 8);
    o.precision = DType::BF16;
    o.optimizer.with_no_decay_1d(no_decay);
    const CompiledModel m = Compiler().compile(models::resnet18(10), o);
    const LayerDescriptor& bn = m.arch.layers[1];
    ASSERT_TRUE(bn.dx_by_conv);
    const MemoryPlan& p = m.base_plan();
    const auto gamma = static_cast<uint64_t>(p.tensor(bn.weight).offset);
    auto writes_gamma = [&](const GraphNode& n) {
      for (const RangeRef& r : n.rout) {
        if (r.kind != RangeRef::Kind::REGIONS || region_family(r.first) != Family::W) continue;
        const RegionSpan s = range_bytes(r, p, n.label);
        if (gamma >= s.offset && gamma < s.offset + s.bytes) return true;
      }
      return false;
    };
    int early = 0, late = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) early += writes_gamma(n);
    for (const GraphNode& n : m.train->nodes(GraphId::OPTIMIZER)) late += writes_gamma(n);
    EXPECT_EQ(early, 0) << "no_decay_1d " << no_decay;
    EXPECT_EQ(late, 1) << "no_decay_1d " << no_decay;
  }
}
