// CompileOptions::join_prologue in the Compiler: ON makes each conv that first reads a batchnorm_add join's
// relu (where conv_prologue is on for it) apply the join: its forward reads the join's batchnorm input, the
// batchnorm's gamma, beta, save_mean, save_invstd and the join's other branch, and writes the join's map
// beside its own; the join becomes a statistics-only batchnorm and no batchnorm_add is left for it. In
// ResNet-18 in bf16 (conv_prologue AUTO: stage 1's convs) that is the second block's first conv (1); with
// conv_prologue ON every join a conv reads first (7 of 8: the last feeds the pool); AUTO and OFF: none. The
// kernels' numerics: tests/plugins/cpu/test_conv_prologue.cpp, tests/e2e/test_join_prologue_cpu.cpp and, on
// a GPU, tests/plugins/cuda/test_cuda_join_prologue.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/models.h"
#include "fresco/ops.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
using Join = CompileOptions::JoinPrologue;
using Pro = CompileOptions::ConvPrologue;

int compile(DType precision, Join mode, Pro pro = Pro::AUTO) {
  CompileOptions o = test::rgb_compile_options(32, 8);
  o.precision = precision;
  o.join_prologue = mode;
  o.conv_prologue = pro;
  // Forked, the projection shortcuts of stages 2-4 read their joins first (three of the seven; the forked
  // case: tests/e2e/test_join_prologue_cpu.cpp).
  o.fork_shortcuts = false;
  const CompiledModel m = Compiler().compile(models::resnet18(10), o);
  const auto& layers = m.arch.layers;
  int convs = 0, joins = 0;
  for (const LayerDescriptor& l : layers) {
    joins += l.kind == LayerKind::ADD && l.applied_by_conv;
    if (l.prologue_join < 0) {
      EXPECT_EQ(l.prologue_residual, kNoTensor) << l.name;
      continue;
    }
    ++convs;
    const LayerDescriptor& join = layers[static_cast<size_t>(l.prologue_join)];
    EXPECT_TRUE(join.kind == LayerKind::ADD && join.applied_by_conv && join.fused_relu) << l.name;
    EXPECT_EQ(l.prologue_bn, join.join_bn) << l.name;
    const LayerDescriptor& bn = layers[static_cast<size_t>(join.join_bn)];
    const int32_t other = join.join_bn == join.input ? join.input2 : join.input;
    EXPECT_EQ(l.prologue_residual, layers[static_cast<size_t>(other)].out) << l.name;
    EXPECT_EQ(l.grad_sums_bn, -1) << l.name << ": the join's relu masks its own gradient";
    int forward = 0, stats = 0, bn_add = 0;
    for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
      if (n.op == FR_OP_BATCHNORM_ADD && n.label == bn.name) ++bn_add;
      if (n.op == FR_OP_BATCHNORM && n.label == bn.name) {
        ++stats;
        EXPECT_EQ(n.out.size(), 2u) << bn.name << ": statistics only";
        EXPECT_EQ(n.in[0], layers[static_cast<size_t>(bn.input)].out) << bn.name;
      }
      if (n.op != FR_OP_CONV2D || n.label != l.name) continue;
      ++forward;
      if (n.in.size() != 7u || n.out.size() < 2u) {
        ADD_FAILURE() << l.name << ": " << n.in.size() << " inputs, " << n.out.size() << " outputs";
        continue;
      }
      EXPECT_EQ(n.in[0], layers[static_cast<size_t>(bn.input)].out) << l.name;
      EXPECT_EQ(n.in[2], bn.weight) << l.name;
      EXPECT_EQ(n.in[4], bn.save_mean) << l.name;
      EXPECT_EQ(n.in[6], l.prologue_residual) << l.name;
      EXPECT_EQ(n.out[1], join.out) << l.name << ": it writes the join's map";
    }
    EXPECT_EQ(forward, 1) << l.name;
    EXPECT_EQ(stats, 1) << l.name;
    EXPECT_EQ(bn_add, 0) << l.name;
  }
  EXPECT_EQ(joins, convs);
  return convs;
}
}  // namespace

TEST(JoinProloguePlan, OnFusesTheJoinsAConvReadsFirst) {
  EXPECT_EQ(compile(DType::BF16, Join::ON), 1);
  EXPECT_EQ(compile(DType::F16, Join::ON), 1);
  EXPECT_EQ(compile(DType::F32, Join::ON, Pro::ON), 7);
}

TEST(JoinProloguePlan, AutoAndOffLeaveTheJoins) {
  EXPECT_EQ(compile(DType::BF16, Join::AUTO), 0);
  EXPECT_EQ(compile(DType::BF16, Join::OFF), 0);
  EXPECT_EQ(compile(DType::F32, Join::ON), 0);  // conv_prologue AUTO: off in fp32
  EXPECT_EQ(compile(DType::F32, Join::ON, Pro::OFF), 0);
}

// The join's map is written by the conv a few nodes later than by the join itself, its other branch read
// that much later: on ResNet-18 at batch 512 in both mixed precisions (the benchmark) the plan is no
// larger than with batchnorm_add.
TEST(JoinProloguePlan, TheResnet18PlanIsNoLarger) {
  for (DType precision : {DType::F16, DType::BF16}) {
    uint64_t bytes[2] = {0, 0};
    for (const Join mode : {Join::OFF, Join::ON}) {
      CompileOptions o = test::rgb_compile_options(32, 512);
      o.precision = precision;
      o.join_prologue = mode;
      const CompiledModel m = Compiler().compile(models::resnet18(10), o);
      bytes[mode == Join::ON] = m.base_plan().total_bytes();
    }
    EXPECT_LE(bytes[1], bytes[0]) << dtype_name(precision);
    std::printf("[          ] %s: %.1f MiB with the join prologue, %.1f without\n", dtype_name(precision),
                static_cast<double>(bytes[1]) / (1 << 20), static_cast<double>(bytes[0]) / (1 << 20));
  }
}
