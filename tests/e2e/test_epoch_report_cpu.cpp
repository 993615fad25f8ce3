// What DeepLearningTask::run reports per epoch (EpochReport): the lr is the one the epoch's last step used,
// by the device's schedule rule (not the next step's, which is the cosine's floor after the last epoch), also
// for a per-epoch scheduler run as a table.
// Runs on the CPU backend.
#include <gtest/gtest.h>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/update_rules.h"

using namespace fresco;

TEST(EpochReport, TheLrIsTheOneTheEpochsLastStepUsed) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;  // 64 samples in batches of 16: 4 steps an epoch, 8 in all, the first 4 warm-up
  t.model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(SGD().base_lr(0.1f))
      .scheduler(CosineAnnealingLR().warmup(1))
      .epochs(2)
      .device("cpu");
  t.compile();
  const TrainingResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 2u);
  FrScheduleParams p{};
  p.base_lr = 0.1f;
  p.warmup_steps = 4;
  p.total_steps = 8;
  p.kind = FR_SCHED_COSINE;
  EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[0].lr), fr_schedule_lr(&p, 3, nullptr));
  EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[1].lr), fr_schedule_lr(&p, 7, nullptr));
  EXPECT_GT(r.epochs[1].lr, 0.01);  // not the schedule's end (0), which no step used
  EXPECT_LT(r.epochs[1].lr, r.epochs[0].lr);
}

// A per-epoch scheduler (StepLR) over a real run: each epoch's lr is its schedule value.
TEST(EpochReport, StepLrHalvesTheLrEveryEpoch) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  t.model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(SGD(0.9f).base_lr(0.2f))
      .scheduler(StepLR(1, 0.5f))
      .epochs(3)
      .device("cpu");
  t.compile();
  const TrainingResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 3u);
  EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[0].lr), 0.2f);
  EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[1].lr), 0.1f);
  EXPECT_FLOAT_EQ(static_cast<float>(r.epochs[2].lr), 0.05f);
  EXPECT_LT(r.epochs[2].train_loss, r.epochs[0].train_loss);
}
