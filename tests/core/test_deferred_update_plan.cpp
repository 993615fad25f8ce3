// CompileOptions::deferred_update in the Compiler: when it is on (ON; AUTO is off), OPTIMIZER holds the
// update alone, reading the step scalars STEP_END keeps for it, the conv weights past the first 1/64 of their
// bytes on the update stream (detached); STEP_END copies the scalars, updates the loss scale and ends the
// step; the forward's first node that touches the detached update's bytes waits for it (join_update), and
// none before it does. The bits: tests/e2e/test_deferred_update_cpu.cpp, on the GPU
// test_cuda_low_precision_training.cpp.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fresco/core/compiler.h"
#include "fresco/core/models.h"
#include "fresco/ops.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {

using DU = CompileOptions::DeferredUpdate;

CompiledModel compile(DType precision, DU mode = DU::AUTO, double ema = 0.0) {
  CompileOptions o = test::rgb_compile_options(16, 4);
  o.precision = precision;
  o.deferred_update = mode;
  o.ema_decay = ema;
  return Compiler().compile(models::resnet18(10), o);
}

bool reads(const GraphNode& n, TensorId id) {
  for (const RangeRef& r : n.rin)
    if (r.kind == RangeRef::Kind::TENSOR && r.tensor == id) return true;
  return false;
}

// Arena bytes [lo, hi) of a region range in the base plan.
std::pair<uint64_t, uint64_t> bytes_of(const CompiledModel& m, const RangeRef& r) {
  const RegionSpan s = range_bytes(r, m.base_plan(), "test");
  return {s.offset, s.offset + s.bytes};
}

}  // namespace

TEST(DeferredUpdatePlan, OnlyOnTurnsItOn) {
  for (DType p : {DType::F16, DType::BF16, DType::F32}) EXPECT_FALSE(compile(p).update_deferred());  // AUTO
  EXPECT_TRUE(compile(DType::F16, DU::ON).update_deferred());
  EXPECT_TRUE(compile(DType::BF16, DU::ON).update_deferred());
  EXPECT_TRUE(compile(DType::F32, DU::ON).update_deferred());
  EXPECT_FALSE(compile(DType::F16, DU::OFF).update_deferred());
  EXPECT_TRUE(compile(DType::F16, DU::OFF).train->nodes(GraphId::STEP_END).empty());
}

TEST(DeferredUpdatePlan, TheUpdateReadsTheKeptScalarsAndTheStepEndsWithoutIt) {
  const CompiledModel m = compile(DType::F16, DU::ON);
  ASSERT_TRUE(m.update_deferred());
  ASSERT_NE(m.t.update_scalars, kNoTensor);
  const auto& end = m.train->nodes(GraphId::STEP_END);
  ASSERT_EQ(end.size(), 3u);
  EXPECT_EQ(end[0].op, FR_OP_COPY);
  ASSERT_EQ(end[0].rin.size(), 1u);
  EXPECT_EQ(end[0].rin[0].tensor, m.t.step_scalars);
  EXPECT_EQ(end[0].rout[0].tensor, m.t.update_scalars);
  EXPECT_EQ(end[1].op, FR_OP_LOSS_SCALE_UPDATE);
  EXPECT_EQ(end[2].op, FR_OP_STEP_DONE);
  int updates = 0;
  for (const GraphNode& n : m.train->nodes(GraphId::OPTIMIZER)) {
    EXPECT_NE(n.op, FR_OP_STEP_DONE);
    EXPECT_NE(n.op, FR_OP_LOSS_SCALE_UPDATE);
    EXPECT_FALSE(reads(n, m.t.step_scalars)) << n.label;
    if (n.op != FR_OP_SGD_UPDATE) continue;
    ++updates;
    EXPECT_TRUE(reads(n, m.t.update_scalars)) << n.label;
  }
  EXPECT_GE(updates, 3);  // the 1-d group, the conv weights on the main stream, and beside the forward
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD))  // no early update
    EXPECT_NE(n.op, FR_OP_SGD_UPDATE) << n.label;
}

// With an EMA too: it reads every weight after the update, on the update stream, which is no conflict with
// the forward's reads of the weights the main stream updated (the join stays at stage 2).
class DeferredUpdateJoin : public ::testing::TestWithParam<double> {};
INSTANTIATE_TEST_SUITE_P(Ema, DeferredUpdateJoin, ::testing::Values(0.0, 0.999));

TEST_P(DeferredUpdateJoin, TheForwardWaitsWhereItFirstReadsTheDetachedWeights) {
  const CompiledModel m = compile(DType::F16, DU::ON, GetParam());
  const MemoryPlan& p = m.base_plan();
  // the A bytes the detached updates write (their last range output, the weight copy)
  std::vector<std::pair<uint64_t, uint64_t>> copies;
  uint64_t detached_w = 0, main_w = 0;
  for (const GraphNode& n : m.train->nodes(GraphId::OPTIMIZER)) {
    if (n.op == FR_OP_EMA_UPDATE) {
      EXPECT_TRUE(n.detached);  // after the update's part on that stream
    }
    if (n.op != FR_OP_SGD_UPDATE) continue;
    const auto w = bytes_of(m, n.rout[0]);
    if (n.detached) {
      EXPECT_TRUE(n.side_stream);
      copies.push_back(bytes_of(m, n.rout.back()));
      detached_w += w.second - w.first;
    } else {
      main_w += w.second - w.first;
    }
  }
  ASSERT_FALSE(copies.empty());
  EXPECT_GT(detached_w, 40 * main_w);  // ResNet-18: all but the stem, stage 1 and the 1-d parameters
  auto reads_detached_copy = [&](const GraphNode& n) {
    for (TensorId id : n.in) {
      if (id == kNoTensor) continue;
      const DTensor& t = p.tensor(id);
      for (const auto& [lo, hi] : copies)
        if (static_cast<uint64_t>(t.offset) < hi && lo < static_cast<uint64_t>(t.offset) + t.slot_bytes)
          return true;
    }
    return false;
  };
  for (GraphId first : {GraphId::FIRST_LAYER_FWD_A, GraphId::FIRST_LAYER_FWD_B})
    for (const GraphNode& n : m.train->nodes(first)) {
      EXPECT_FALSE(n.join_update) << n.label;  // the stem's weights are updated before the forward
      EXPECT_FALSE(reads_detached_copy(n)) << n.label;
    }
  int joins = 0;
  bool joined = false;
  for (const GraphNode& n : m.train->nodes(GraphId::DEEP_FWD_BWD)) {
    if (n.join_update) {
      ++joins;
      joined = true;
      EXPECT_EQ(n.op, FR_OP_CONV2D) << n.label;  // stage 2's first conv
    }
    if (!joined) {
      EXPECT_FALSE(reads_detached_copy(n)) << n.label << " reads a weight before its update";
    }
  }
  EXPECT_EQ(joins, 1);
  for (GraphId g : {GraphId::FIRST_LAYER_BWD_A, GraphId::FIRST_LAYER_BWD_B, GraphId::GRAD_CAST,
                    GraphId::NAN_CHECK_AND_GRAD_SCALING, GraphId::STEP_END})
    for (const GraphNode& n : m.train->nodes(g)) EXPECT_FALSE(n.join_update) << n.label;
}
