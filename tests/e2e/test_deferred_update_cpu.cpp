// CompileOptions::deferred_update on the CPU: a step's optimizer update run at the start of the next step
// (the executor's step that begins with the pending update, and the update alone after an epoch's last step
// or a single train_step) trains bit for bit like the update at the step's end. The CPU runs the nodes in
// order, so this checks what the deferral changes besides the streams: the step scalars the update reads
// (kept at STEP_END, the lr and counters of the step that made the gradients), the loss scale and
// step_done before the update, an EMA after it, and the pending update run before anything reads the
// weights. The GPU runs, where the update really overlaps the next forward:
// test_cuda_low_precision_training.cpp (DeferredUpdateGivesTheSameBits). The plan:
// tests/core/test_deferred_update_plan.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/temp_dir.h"
#include "e2e/small_residual_task.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {

using DU = CompileOptions::DeferredUpdate;

struct Trained {
  std::vector<double> losses, lrs;  // per epoch
  test::Snapshot state;
  std::string checkpoint;  // its bytes: weights, buffers, the EMA, batchnorm's statistics, the step scalars
  bool deferred = false;
};

// Three epochs of the small residual network (two steps each, so an update is pending between the steps of
// an epoch and runs alone after its last) through run(), with an lr that changes every step (cosine with a
// warm-up) and an EMA of the weights.
Trained train_epochs(DU mode) {
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.epochs(3).scheduler(CosineAnnealingLR().warmup(1)).ema(0.9, 1).deferred_update(mode);
  t.compile();
  Trained r;
  r.deferred = t.compiled().update_deferred();
  for (const EpochReport& e : t.run().epochs) {
    r.losses.push_back(e.train_loss);
    r.lrs.push_back(e.lr);
  }
  r.state = t.snapshot();
  const test::TempDir dir;
  r.checkpoint = test::checkpoint_bytes(t, dir.file("c.ckpt"));
  return r;
}

void expect_same_state(const test::Snapshot& a, const test::Snapshot& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second.size(), b[i].second.size()) << a[i].first;
    EXPECT_EQ(0, std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)))
        << a[i].first;
  }
}

}  // namespace

TEST(DeferredUpdateCpu, EpochsTrainBitForBitLikeTheUpdateAtTheStepsEnd) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const Trained end = train_epochs(DU::OFF);
  const Trained next = train_epochs(DU::ON);
  EXPECT_FALSE(end.deferred);
  EXPECT_TRUE(next.deferred);
  EXPECT_EQ(next.losses, end.losses);
  EXPECT_EQ(next.lrs, end.lrs);
  expect_same_state(next.state, end.state);  // weights, gradients and buffers
  EXPECT_FALSE(end.checkpoint.empty());
  EXPECT_TRUE(next.checkpoint == end.checkpoint);    // and the EMA, statistics and step scalars
  EXPECT_NE(end.losses.front(), end.losses.back());  // it really trained
}

TEST(DeferredUpdateCpu, SingleStepsRunTheirUpdateBeforeReturning) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  // train_step runs the step and then its update alone: the weights it leaves are the updated ones
  test::expect_same_bits([](DeepLearningTask& t) { t.deferred_update(DU::OFF); },
                         [](DeepLearningTask& t) { t.deferred_update(DU::ON); });
}

TEST(DeferredUpdateCpu, RefusedWhereTheUpdateCannotWait) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto compile_with = [](Optimizer o) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.optimizer(o).deferred_update(DU::ON);
    t.compile();
  };
  try {
    compile_with(LARS(0.9f).base_lr(0.1f));
    FAIL() << "LARS with a deferred update compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("LARS"), std::string::npos) << e.what();
  }
  // AUTO (off) leaves it off, without an error
  DeepLearningTask t;
  test::configure_small_residual(t);
  t.optimizer(LARS(0.9f).base_lr(0.1f));
  t.compile();
  EXPECT_FALSE(t.compiled().update_deferred());
}
