// The CPU kernels through the real memory plan / graph / capture path (SimpleTask): fc -> relu ->
// relu_backward -> fc_backward in GraphId::DEEP_FWD_BWD over F_FP32 / W / G tensors matches the double
// reference; replaying the captured call list twice is bitwise identical to Runtime::run_eager on the same
// capture; an OPTIMIZER graph (lr_schedule, sgd_update over the W/G/M FC region ranges, step_done) matches
// PyTorch SGD for two steps. Also checks that the CPU kernel table provides every built-in op of ops.h. Part
// of test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fresco/core/graph.h"
#include "fresco/core/runtime.h"
#include "fresco/core/task.h"
#include "plugins/cpu/op_harness.h"
#include "reference/activations.h"
#include "reference/fc.h"
#include "reference/optimizers.h"

namespace {

using fresco::DType;
using fresco::Family;
using fresco::GraphId;
using fresco::GraphNode;
using fresco::NodeKind;
using fresco::RangeRef;
using fresco::Region;
using fresco::Shape;
using fresco::TensorId;

TEST(CpuKernelTable, ProvidesEveryBuiltinOp) {
  struct Want {
    const char* op;
    uint32_t kind, dtype;
  };
  const Want wants[] = {{FR_OP_FC, FR_COMPUTE, FR_F32},
                        {FR_OP_FC_BACKWARD, FR_COMPUTE, FR_F32},
                        {FR_OP_RELU, FR_COMPUTE, FR_F32},
                        {FR_OP_RELU_BACKWARD, FR_COMPUTE, FR_F32},
                        {FR_OP_DROPOUT, FR_COMPUTE, FR_F32},
                        {FR_OP_DROPOUT_BACKWARD, FR_COMPUTE, FR_F32},
                        {FR_OP_NORMALIZE_INPUT, FR_COMPUTE, FR_F32},
                        {FR_OP_SOFTMAX_XENT, FR_COMPUTE, FR_F32},
                        {FR_OP_CLEAR, FR_RANGE, FR_U8},
                        {FR_OP_COPY, FR_RANGE, FR_U8},
                        {FR_OP_ACCUMULATE_METRICS, FR_RANGE, FR_U8},
                        {FR_OP_LR_SCHEDULE, FR_RANGE, FR_U8},
                        {FR_OP_STEP_DONE, FR_RANGE, FR_U8},
                        {FR_OP_SGD_UPDATE, FR_RANGE, FR_F32},
                        {FR_OP_ADAM_UPDATE, FR_RANGE, FR_F32}};
  for (const Want& w : wants) {
    const FrKernelDef* k = fresco::test::find_kernel(w.op, w.dtype);
    ASSERT_NE(k, nullptr) << w.op;
    EXPECT_EQ(k->kind, w.kind) << w.op;
    EXPECT_STREQ(k->device, "cpu");
    EXPECT_NE(k->run, nullptr) << w.op;
    EXPECT_GE(k->struct_size, sizeof(FrKernelDef)) << w.op;
  }
  EXPECT_EQ(fresco::test::find_kernel(FR_OP_FC, FR_F16), nullptr) << "no f16 fc on the CPU";
  EXPECT_EQ(fresco::test::find_kernel("no_such_op"), nullptr);
}

GraphNode compute(const char* op, std::vector<TensorId> in, std::vector<TensorId> out, const char* label) {
  GraphNode n;
  n.kind = NodeKind::COMPUTE;
  n.op = op;
  n.in = std::move(in);
  n.out = std::move(out);
  n.label = label;
  return n;
}

GraphNode range_node(const char* op, std::vector<RangeRef> rin, std::vector<RangeRef> rout) {
  GraphNode n;
  n.kind = NodeKind::RANGE;
  n.op = op;
  n.rin = std::move(rin);
  n.rout = std::move(rout);
  n.label = "optimizer";
  return n;
}

constexpr int64_t kM = 37, kK = 19, kN = 10;
constexpr float kMomentum = 0.9f, kWeightDecay = 1e-3f, kBaseLr = 0.05f;

// One tiny job: fc(K -> N, bias) + relu, its backward for an upstream gradient R, and an SGD optimizer graph.
struct TinyJob {
  fresco::SimpleTask task{"cpu"};
  TensorId x, w, b, y, r, dr, dy, dx, gw, gb, scalars;

  TinyJob() {
    fresco::test::CpuPlugin::get();  // plugins from this build, before the task searches the defaults
    const Shape act{kM, 1, 1, kN};
    x = task.tensor(Region::F_FP32, DType::F32, Shape{kM, 1, 1, kK}, "x");
    fresco::MemoryPlan& plan = task.plan();
    w = plan.alloc_fc_weight(kN, kK, "fc1", 0);
    b = plan.alloc_fc_bias(kN, "fc1", 0);
    gb = plan.alloc_shadow(Family::G, b);
    gw = plan.alloc_shadow(Family::G, w);
    plan.alloc_shadow(Family::M, b);
    plan.alloc_shadow(Family::M, w);
    scalars = plan.alloc_step_scalars();
    y = task.tensor(Region::F_FP32, DType::F32, act, "fc1.out");
    r = task.tensor(Region::F_FP32, DType::F32, act, "relu1.out");
    dr = task.tensor(Region::F_FP32, DType::F32, act, "grad(relu1.out)");
    dy = task.tensor(Region::F_FP32, DType::F32, act, "grad(fc1.out)");
    dx = task.tensor(Region::F_FP32, DType::F32, Shape{kM, 1, 1, kK}, "grad(x)");
    task.lock_memory();

    task.add(GraphId::DEEP_FWD_BWD, compute(FR_OP_FC, {x, w, b}, {y}, "fc1").with_params(FrFcParams{1, 0}));
    task.add(GraphId::DEEP_FWD_BWD, compute(FR_OP_RELU, {y}, {r}, "relu1"));
    task.add(GraphId::DEEP_FWD_BWD, compute(FR_OP_RELU_BACKWARD, {dr, r}, {dy}, "relu1"));
    task.add(
        GraphId::DEEP_FWD_BWD,
        compute(FR_OP_FC_BACKWARD, {dy, x, w}, {gw, gb, dx}, "fc1").with_params(FrFcBackwardParams{1, 1}));

    const RangeRef s = RangeRef::of(scalars, DType::U8);
    const RangeRef wr = RangeRef::regions(Region::W_FC_BIAS, Region::W_FC_WEIGHT);
    const RangeRef gr = RangeRef::regions(Region::G_FC_BIAS, Region::G_FC_WEIGHT);
    const RangeRef mr = RangeRef::regions(Region::M_FC_BIAS, Region::M_FC_WEIGHT);
    FrScheduleParams sched{};
    sched.kind = FR_SCHED_CONSTANT;
    sched.warmup_steps = 2;
    sched.base_lr = kBaseLr;
    task.add(GraphId::OPTIMIZER, range_node(FR_OP_LR_SCHEDULE, {}, {s}).with_params(sched));
    task.add(GraphId::OPTIMIZER, range_node(FR_OP_SGD_UPDATE, {gr, s}, {wr, mr})
                                     .with_params(FrSgdParams{kMomentum, kWeightDecay, 0, 0}));
    task.add(GraphId::OPTIMIZER, range_node(FR_OP_STEP_DONE, {}, {s}));
    task.compile();
  }

  std::vector<float> get(TensorId id, size_t n) { return task.read<float>(id, n); }
};

// The double reference of the job's forward/backward for the given (double) weights.
struct RefPass {
  std::vector<double> pre, r;
  fresco::ref::FcGrads g;
};
RefPass reference_pass(const std::vector<double>& x, const std::vector<double>& w,
                       const std::vector<double>& b, const std::vector<double>& dr) {
  RefPass p;
  p.pre = fresco::ref::fc_forward(x, w, b, kM, kK, kN);
  p.r = fresco::ref::relu(p.pre);
  const std::vector<double> dy = fresco::ref::relu_backward(dr, p.r);
  p.g = fresco::ref::fc_backward(dy, x, w, kM, kK, kN);
  return p;
}

struct Inputs {
  std::vector<float> x, w, b, dr;
  Inputs() {
    std::mt19937 rng(101);
    x = fresco::test::random_floats(rng, kM * kK, -1.0f, 1.0f);
    w = fresco::test::random_floats(rng, kN * kK, -0.5f, 0.5f);
    b = fresco::test::random_floats(rng, kN, -0.5f, 0.5f);
    dr = fresco::test::random_floats(rng, kM * kN, -1.0f, 1.0f);
  }
  void write(TinyJob& job) {
    job.task.write(job.x, x);
    job.task.write(job.w, w);
    job.task.write(job.b, b);
    job.task.write(job.dr, dr);
  }
};

struct Outputs {
  std::vector<float> r, gw, gb, dx;
  explicit Outputs(TinyJob& job)
      : r(job.get(job.r, kM * kN)),
        gw(job.get(job.gw, kN * kK)),
        gb(job.get(job.gb, kN)),
        dx(job.get(job.dx, kM * kK)) {}
  bool bitwise_equal(const Outputs& o) const {
    return fresco::test::bitwise_equal(r, o.r) && fresco::test::bitwise_equal(gw, o.gw) &&
           fresco::test::bitwise_equal(gb, o.gb) && fresco::test::bitwise_equal(dx, o.dx);
  }
};

TEST(CpuSimpleTask, FcReluForwardBackwardMatchesReference) {
  TinyJob job;
  Inputs in;
  in.write(job);
  job.task.run(GraphId::DEEP_FWD_BWD);
  const Outputs out(job);
  const RefPass ref = reference_pass(fresco::test::to_double(in.x), fresco::test::to_double(in.w),
                                     fresco::test::to_double(in.b), fresco::test::to_double(in.dr));
  for (double v : ref.pre) ASSERT_GT(std::fabs(v), 1e-4) << "test data too close to the relu kink";
  EXPECT_TRUE(fresco::test::all_close(out.r, ref.r, 1e-5, 1e-6)) << "relu(fc(x))";
  EXPECT_TRUE(fresco::test::all_close(out.gw, ref.g.dw, 1e-5, 1e-6)) << "dW";
  EXPECT_TRUE(fresco::test::all_close(out.gb, ref.g.db, 1e-5, 1e-6)) << "db";
  EXPECT_TRUE(fresco::test::all_close(out.dx, ref.g.dx, 1e-5, 1e-6)) << "dx";
  EXPECT_TRUE(fresco::test::all_close(job.get(job.y, kM * kN), ref.pre, 1e-5, 1e-6)) << "fc(x)";
}

TEST(CpuSimpleTask, ReplayIsDeterministicAndEqualsEagerRun) {
  TinyJob job;
  Inputs in;
  in.write(job);
  job.task.run(GraphId::DEEP_FWD_BWD);
  const Outputs first(job);
  job.task.run(GraphId::DEEP_FWD_BWD);
  const Outputs second(job);
  EXPECT_TRUE(first.bitwise_equal(second)) << "two replays of the captured list differ";

  // Poison every output, then run the same capture eagerly.
  const std::vector<float> nan_act(kM * kN, std::numeric_limits<float>::quiet_NaN());
  job.task.write(job.y, nan_act);
  job.task.write(job.r, nan_act);
  job.task.write(job.dy, nan_act);
  job.task.write(job.gw, std::vector<float>(kN * kK, std::numeric_limits<float>::quiet_NaN()));
  job.task.write(job.gb, std::vector<float>(kN, std::numeric_limits<float>::quiet_NaN()));
  job.task.write(job.dx, std::vector<float>(kM * kK, std::numeric_limits<float>::quiet_NaN()));
  const int32_t idx = job.task.atlas().slot(fresco::Variant::TRAIN_BASE, GraphId::DEEP_FWD_BWD).captured_idx;
  ASSERT_GE(idx, 0);
  fresco::Runtime& rt = job.task.runtime();
  ASSERT_EQ(rt.capture(idx).calls.size(), 4u);
  rt.run_eager(rt.capture(idx));
  rt.synchronize();
  const Outputs eager(job);
  EXPECT_TRUE(first.bitwise_equal(eager)) << "run_eager differs from the captured replay";
}

TEST(CpuSimpleTask, OptimizerGraphMatchesPyTorchSgd) {
  TinyJob job;
  Inputs in;
  in.write(job);
  FrStepScalars s0{};
  s0.loss_scale = 1.0f;
  job.task.write(job.scalars, &s0, sizeof(s0));

  const fresco::ref::SgdConfig cfg{kMomentum, kWeightDecay, false};
  fresco::ref::SgdState ref_w{fresco::test::to_double(in.w), {}, false};
  fresco::ref::SgdState ref_b{fresco::test::to_double(in.b), {}, false};
  const std::vector<double> xd = fresco::test::to_double(in.x), drd = fresco::test::to_double(in.dr);
  const double lrs[] = {kBaseLr / 2.0, kBaseLr, kBaseLr};  // warm-up over 2 steps, then constant
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    job.task.run(GraphId::DEEP_FWD_BWD);
    job.task.run(GraphId::OPTIMIZER);
    const RefPass ref = reference_pass(xd, ref_w.w, ref_b.w, drd);
    fresco::ref::sgd_step(ref_w, ref.g.dw, lrs[step], cfg);
    fresco::ref::sgd_step(ref_b, ref.g.db, lrs[step], cfg);
    EXPECT_TRUE(fresco::test::all_close(job.get(job.w, kN * kK), ref_w.w, 1e-5, 1e-6)) << "fc1.weight";
    EXPECT_TRUE(fresco::test::all_close(job.get(job.b, kN), ref_b.w, 1e-5, 1e-6)) << "fc1.bias";
    FrStepScalars s{};
    job.task.read(job.scalars, &s, sizeof(s));
    EXPECT_EQ(s.step, step + 1);
    EXPECT_NEAR(s.lr, lrs[step], 1e-9);
  }
}

}  // namespace
