// OneCycleLR (Scheduler::ONE_CYCLE) in training on the CPU backend: each epoch reports its last step's lr
// from the one-cycle table, the momentum (Adam: beta1) really comes from the per-step table, and a kernel
// written before the per-step momentum (FR_KERNEL_STEP_MOMENTUM) is refused for it. The tables themselves:
// tests/core/test_schedulers.cpp; the kernels: tests/plugins/cpu/test_optimizers.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "e2e/legacy_conv.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"

using namespace fresco;

namespace {
// The MLP above trained 3 epochs of 4 steps with `opt` and `sched`; its weights and report.
std::pair<TrainingResult, std::vector<std::pair<std::string, std::vector<float>>>> one_cycle_run(
    const Optimizer& opt, const Scheduler& sched) {
  DeepLearningTask t;
  t.model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(opt)
      .scheduler(sched)
      .epochs(3)
      .shuffle(false)
      .device("cpu");
  t.compile();
  TrainingResult r = t.run();
  return {r, t.snapshot()};
}
}  // namespace

// OneCycleLR over a real run: each epoch reports the lr of its last step from the one-cycle table, and the
// momentum really comes from the per-step table: cycled between two equal momenta it trains to the bits of
// the fixed momentum (SGD's momentum, Adam's beta1) without cycling, and cycled between 0.85 and 0.95 it
// trains to other weights.
TEST(OneCycleCpu, TakesTheLrAndTheMomentumOfEveryStep) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Scheduler cycled = OneCycleLR();
  const auto [r, cycled_w] = one_cycle_run(SGD(0.9f, true).base_lr(0.2f), cycled);
  ASSERT_EQ(r.epochs.size(), 3u);
  const std::vector<float> lrs = cycled.step_table(0.2f, 4, 3);
  for (size_t e = 0; e < 3; ++e) EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[e].lr), lrs[4 * e + 3]) << e;
  EXPECT_LT(r.epochs[2].train_loss, r.epochs[0].train_loss);
  Scheduler flat = OneCycleLR(), fixed = OneCycleLR();
  flat.base_momentum = flat.max_momentum = 0.9;
  fixed.cycle_momentum = false;
  for (const Optimizer& opt : {SGD(0.9f, true).base_lr(0.2f), Adam().base_lr(0.01f)}) {
    SCOPED_TRACE(opt.name());
    const auto from_table = one_cycle_run(opt, flat).second, from_params = one_cycle_run(opt, fixed).second;
    EXPECT_EQ(from_table, from_params);
  }
  EXPECT_NE(cycled_w, one_cycle_run(SGD(0.9f, true).base_lr(0.2f), flat).second);
}

// SGD's buffer exists for every step or none, so a cycle that reaches momentum 0 is refused for SGD (PyTorch
// would skip the buffer's update at that step); Adam's beta1 may be 0.
// A table scheduler shorter than the run holds its last lr and its last momentum past its end: the same
// bits as the table written out to the run's length. (The momentum table was bound by its padded slot, so
// a step past the end read the padding's 0 as its momentum.)
TEST(OneCycleCpu, AShortTableHoldsItsLastMomentum) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  Scheduler short_table = TableLR({0.2f, 0.1f}), long_table = TableLR(std::vector<float>(12, 0.1f));
  short_table.momenta = {0.9f, 0.5f};
  long_table.table[0] = 0.2f;
  long_table.momenta.assign(12, 0.5f);
  long_table.momenta[0] = 0.9f;
  for (const Optimizer& opt : {SGD(0.9f, true), Adam()}) {
    SCOPED_TRACE(opt.name());
    EXPECT_EQ(one_cycle_run(opt, short_table).second, one_cycle_run(opt, long_table).second);
  }
}

TEST(OneCycleCpu, AnSgdMomentumCycleThroughZeroIsRefused) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  Scheduler zero = OneCycleLR();
  zero.base_momentum = 0.0;
  auto task = [&](const Optimizer& opt) {
    auto t = std::make_unique<DeepLearningTask>();
    t->model(seq({flatten(), fc(4)}))
        .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
        .batch_size(16)
        .optimizer(opt)
        .scheduler(zero)
        .epochs(3)
        .device("cpu");
    return t;
  };
  try {
    task(SGD(0.9f).base_lr(0.1f))->compile();
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("both must be above 0"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(task(Adam().base_lr(0.01f))->compile());
}

// A sgd_update kernel that does not declare the per-step momentum (legacy_conv's f16 one) is refused for a
// node with the momentum table, never handed a range it would ignore; the plain node still compiles.
TEST(OneCycleCpu, AKernelWithoutThePerStepMomentumIsRefusedForIt) {
  ASSERT_TRUE(test::load_legacy_conv());
  auto sgd_task = [](bool table) {
    auto t = std::make_unique<SimpleTask>("cpu");
    const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{1, 1, 1, 64}, "w");
    const TensorId g = t->tensor(Region::T_TEMP, DType::F16, Shape{1, 1, 1, 64}, "g");
    const TensorId s = t->tensor(Region::T_TEMP, DType::U8, Shape{1, 1, 1, sizeof(FrStepScalars)}, "scalars");
    const TensorId m = t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 8}, "momenta");
    t->lock_memory();
    std::vector<RangeRef> rin = {RangeRef::of(g, DType::F16), RangeRef::of(s, DType::U8)};
    if (table) rin.push_back(RangeRef::of(m, DType::F32));
    GraphNode n;
    n.kind = NodeKind::RANGE;
    n.op = FR_OP_SGD_UPDATE;
    n.label = "sgd";
    n.rin = rin;
    n.rout = {RangeRef::of(w, DType::F16)};
    n.with_params(FrSgdParams{0.0f, 0.0f, 0, 0});
    t->add(GraphId::DEEP_FWD_BWD, n);
    return t;
  };
  test::expect_refused(*sgd_task(true), "an sgd_update node with a momentum table",
                       {"FR_KERNEL_STEP_MOMENTUM", "legacy_conv", "cycle_momentum"});
  EXPECT_NO_THROW(sgd_task(false)->compile());
}
