// The EMA of the weights (DeepLearningTask::ema, ema_update in OPTIMIZER) on the CPU backend: after each
// step its values are those of AveragedModel(get_ema_multi_avg_fn(decay)) updated every `every` steps,
// recomputed on the host from the weights after each step; evaluate(true) evaluates with them and puts the
// trained weights back bit for bit; the epoch reports carry its figures; a checkpoint keeps it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/update_rules.h"

using namespace fresco;

namespace {
std::unique_ptr<DeepLearningTask> job(double decay, int32_t every) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(SGD(0.9f).base_lr(0.1f))
      .epochs(2)
      .device("cpu")
      .seed(7)
      .ema(decay, every);
  t->compile();
  return t;
}
}  // namespace

TEST(EmaCpu, AveragesTheWeightsLikeAveragedModel) {
  auto t = job(0.8, 2);
  std::vector<uint32_t> idx(64);
  std::iota(idx.begin(), idx.end(), 0u);
  std::vector<float> want = t->read_param(1, "weight");  // before the first update: the initial weights
  EXPECT_EQ(t->read_ema_param(1, "weight"), want);
  for (int32_t step = 0; step < 6; ++step) {
    t->train_step(idx.data() + 16 * (step % 4), 16);
    const std::vector<float> w = t->read_param(1, "weight");
    const int action = fr_ema_action(step, 2);
    for (size_t i = 0; i < want.size(); ++i)
      if (action == 1)
        want[i] = w[i];
      else if (action == 2)
        want[i] = fr_ema_step(want[i], w[i], static_cast<float>(1.0 - 0.8));
    ASSERT_EQ(t->read_ema_param(1, "weight"), want) << "after step " << step;
    if (step == 3) {
      EXPECT_NE(want, w);  // an average, not the weights
    }
  }
  // evaluate(true) uses the average and leaves the trained weights as they were
  const auto before = t->snapshot();
  const EvalResult trained = t->evaluate(), averaged = t->evaluate(true);
  EXPECT_EQ(t->snapshot(), before);
  EXPECT_NE(trained.loss, averaged.loss);
  EXPECT_EQ(t->evaluate().loss, trained.loss);
}

TEST(EmaCpu, EpochReportsAndCheckpointsCarryIt) {
  auto t = job(0.9, 1);
  const TrainingResult r = t->run(1);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_FALSE(std::isnan(r.epochs[0].ema_test_acc));
  EXPECT_FALSE(std::isnan(r.epochs[0].ema_test_loss));
  const std::string path = (std::filesystem::temp_directory_path() / "fresco_ema.ckpt").string();
  t->save_checkpoint(path);
  auto resumed = job(0.9, 1);
  resumed->load_checkpoint(path);
  EXPECT_EQ(resumed->read_ema_param(1, "weight"), t->read_ema_param(1, "weight"));
  t->run();
  resumed->run();
  EXPECT_EQ(resumed->read_ema_param(3, "weight"), t->read_ema_param(3, "weight"));
  std::filesystem::remove(path);
  // without an EMA, evaluate(true) and read_ema_param are usage errors; a decay of 1 is refused
  auto plain = job(0.0, 1);
  EXPECT_THROW(plain->evaluate(true), Error);
  EXPECT_THROW(plain->read_ema_param(1, "weight"), Error);
  EXPECT_THROW(job(1.0, 1), Error);
  EXPECT_THROW(job(0.5, 0), Error);
}

// A weights-only load takes the file's average into this job's EMA (fresco eval of a saved EMA), and a job
// whose checkpoint has no average starts its own from the loaded weights.
TEST(EmaCpu, WeightsOnlyLoadsTakeTheAverage) {
  auto t = job(0.5, 1);
  t->run(2);
  const std::string path = (std::filesystem::temp_directory_path() / "fresco_ema_weights.ckpt").string();
  t->save_checkpoint(path);
  auto other = job(0.5, 1);
  other->load_checkpoint(path, /*weights_only=*/true);
  EXPECT_EQ(other->read_ema_param(1, "weight"), t->read_ema_param(1, "weight"));
  EXPECT_EQ(other->evaluate(true).loss, t->evaluate(true).loss);
  auto plain = job(0.0, 1);
  plain->run(1);
  plain->save_checkpoint(path);
  auto with_ema = job(0.5, 1);
  with_ema->load_checkpoint(path, true);
  EXPECT_EQ(with_ema->read_ema_param(1, "weight"), plain->read_param(1, "weight"));
  std::filesystem::remove(path);
}
