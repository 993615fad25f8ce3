// silu, sigmoid and tanh layers in the Compiler: one forward and one backward node each; silu's backward
// reads the layer input, sigmoid's and tanh's the layer output (as their kernels expect). Training with them
// is checked by ActivationsCpu.MlpOverfitsOneBatch.
#include <gtest/gtest.h>

#include <string>

#include "fresco/core/compiler.h"
#include "fresco/ops.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
const GraphNode* find(const CompiledModel& m, const std::string& op) {
  for (int g = 0; g < kGraphIdCount; ++g)
    for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g)))
      if (n.op == op) return &n;
  return nullptr;
}
}  // namespace

TEST(CompilerActivations, BackwardReadsInputOrOutput) {
  const CompileOptions o = test::small_compile_options(4);
  Compiler c;
  const CompiledModel m = c.compile(seq({fc(8), silu(), fc(8), sigmoid(), fc(8), tanh(), fc(10)}), o);
  for (const auto& [fwd, bwd, reads_output] : {std::tuple{FR_OP_SILU, FR_OP_SILU_BACKWARD, false},
                                               std::tuple{FR_OP_SIGMOID, FR_OP_SIGMOID_BACKWARD, true},
                                               std::tuple{FR_OP_TANH, FR_OP_TANH_BACKWARD, true}}) {
    SCOPED_TRACE(fwd);
    const GraphNode* f = find(m, fwd);
    const GraphNode* b = find(m, bwd);
    ASSERT_NE(f, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->in.size(), 2u);
    EXPECT_EQ(b->in[1], reads_output ? f->out[0] : f->in[0]);
  }
}

// An fc's fused relu masks the incoming gradient in place: inside a residual block that gradient is also the
// shortcut's, so there the relu stays a node of its own (the shortcut must get the unmasked gradient).
TEST(CompilerActivations, FcReluInsideAResidualBlockIsNotFused) {
  Compiler c;
  const CompiledModel m =
      c.compile(seq({fc(16), relu(), residual({fc(16), relu()}), fc(10)}), test::small_compile_options(4));
  int fused = 0, relu_nodes = 0;
  for (const auto& l : m.arch.layers) fused += l.kind == LayerKind::FC && l.fused_relu ? 1 : 0;
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) relu_nodes += n.op == "relu" ? 1 : 0;
  EXPECT_EQ(fused, 1);       // the first fc's relu (its gradient is private)
  EXPECT_EQ(relu_nodes, 1);  // the block's relu, before the join
}
