// Checkpoints (DeepLearningTask::save_checkpoint / load_checkpoint) on the CPU backend: a job trained for one
// epoch, saved, and resumed in a newly compiled task ends with the same bits (weights, moments, batchnorm
// running statistics, every epoch's losses) as the same job trained without a stop, with SGD + Nesterov
// momentum + weight decay under a cosine schedule with warm-up, Adam, dropout, a partial last batch and
// batchnorm; run(1) then run() in one task does too; and from within an epoch (run_steps). A checkpoint of
// another job (batch, model, seed) is refused naming what differs, before anything is written; run() after
// the last epoch is a usage error.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <limits>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "support/error_of.h"

using namespace fresco;
using fresco::test::error_of;
namespace fs = std::filesystem;

namespace {
// 100 samples in batches of 16: six full batches and one of 4 an epoch.
std::unique_ptr<DeepLearningTask> job(const Optimizer& opt, int64_t batch = 16, uint64_t seed = 3,
                                      int32_t epochs = 3) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({conv(8, 3, 1, 1), bn(), relu(), flatten(), dropout(0.2f), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(100, 1), data::synthetic_patches(40, 2))
      .batch_size(batch)
      .optimizer(opt)
      .scheduler(CosineAnnealingLR().warmup(1))
      .epochs(epochs)
      .seed(seed)
      .device("cpu");
  t->compile();
  return t;
}

struct Trained {
  std::vector<EpochReport> epochs;
  std::vector<std::pair<std::string, std::vector<float>>> state;
  std::vector<float> running_mean;
};

void expect_same(const Trained& a, const Trained& b) {
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (size_t e = 0; e < a.epochs.size(); ++e) {
    EXPECT_EQ(a.epochs[e].epoch, b.epochs[e].epoch);
    EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.epochs[e].test_loss, b.epochs[e].test_loss) << "epoch " << e + 1;
    EXPECT_EQ(a.epochs[e].lr, b.epochs[e].lr) << "epoch " << e + 1;
  }
  ASSERT_EQ(a.state.size(), b.state.size());
  for (size_t i = 0; i < a.state.size(); ++i) EXPECT_EQ(a.state[i], b.state[i]) << a.state[i].first;
  EXPECT_EQ(a.running_mean, b.running_mean);
}

Trained finish(DeepLearningTask& t, std::vector<EpochReport> before = {}) {
  Trained r;
  r.epochs = std::move(before);
  for (const EpochReport& e : t.run().epochs) r.epochs.push_back(e);
  r.state = t.snapshot();
  r.running_mean = t.read_param(1, "running_mean");
  return r;
}

void check_resume(const Optimizer& opt, const std::string& name) {
  const std::string path = (fs::temp_directory_path() / ("fresco_resume_" + name + ".ckpt")).string();
  auto straight = job(opt);
  const Trained want = finish(*straight);
  ASSERT_EQ(want.epochs.size(), 3u);

  auto first = job(opt);
  const std::vector<EpochReport> one = first->run(1).epochs;
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(first->epochs_done(), 1);
  first->save_checkpoint(path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  auto resumed = job(opt);
  resumed->load_checkpoint(path);
  EXPECT_EQ(resumed->epochs_done(), 1);
  expect_same(finish(*resumed, one), want);

  expect_same(finish(*first, one), want);  // the first task going on from where it stopped
  const auto [code, what] = error_of([&] { first->run(); });
  EXPECT_EQ(code, ErrorCode::kUsage);
  EXPECT_NE(what.find("all 3 epochs of this job have been run"), std::string::npos) << what;
  fs::remove(path);
}
}  // namespace

TEST(Checkpoint, ResumedSgdRunEndsWithTheBitsOfAnUninterruptedOne) {
  check_resume(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f), "sgd");
}

TEST(Checkpoint, ResumedAdamRunEndsWithTheBitsOfAnUninterruptedOne) {
  check_resume(Adam().base_lr(1e-3f), "adam");
}

// Within an epoch (run_steps): checkpoints written part-way through the first epoch, the second, and before
// the second's partial last batch, resumed in new tasks, end with the bits and the epoch reports of the
// uninterrupted run (the stopped epoch's report covering all its steps: its metrics so far are in the
// file), and so does the task that wrote each going on; run_steps in pieces across epoch boundaries too.
TEST(Checkpoint, ResumedWithinAnEpochEndsWithTheBitsOfAnUninterruptedOne) {
  const std::string path = (fs::temp_directory_path() / "fresco_resume_within.ckpt").string();
  const Optimizer sgd = SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f);
  auto straight = job(sgd);
  const Trained want = finish(*straight);
  const int64_t spe = straight->steps_per_epoch();
  ASSERT_EQ(spe, 7);  // six batches of 16 and one of 4
  for (int64_t at : {int64_t{3}, spe + 3, spe + 6}) {
    SCOPED_TRACE("saved at step " + std::to_string(at));
    auto first = job(sgd);
    const std::vector<EpochReport> before = first->run_steps(at).epochs;
    EXPECT_EQ(before.size(), static_cast<size_t>(at / spe));
    EXPECT_EQ(first->epochs_done(), at / spe);
    EXPECT_EQ(first->epoch_steps_done(), at % spe);
    first->save_checkpoint(path);
    auto resumed = job(sgd);
    resumed->load_checkpoint(path);
    EXPECT_EQ(resumed->epochs_done(), at / spe);
    EXPECT_EQ(resumed->epoch_steps_done(), at % spe);
    expect_same(finish(*resumed, before), want);
    expect_same(finish(*first, before), want);
  }
  auto pieces = job(sgd);
  std::vector<EpochReport> reports;
  for (int64_t n : {2, 5, 9}) {
    for (const EpochReport& e : pieces->run_steps(n).epochs) reports.push_back(e);
  }
  EXPECT_EQ(pieces->epochs_done(), 2);
  EXPECT_EQ(pieces->epoch_steps_done(), 2);
  expect_same(finish(*pieces, reports), want);
  EXPECT_EQ(error_of([&] { pieces->run_steps(1); }).first, ErrorCode::kUsage);  // all epochs done
  auto rest = job(sgd);  // a budget beyond the run from within an epoch: the run's end, no overflow
  rest->run_steps(1);
  EXPECT_EQ(rest->run_steps(std::numeric_limits<int64_t>::max()).epochs.size(), 3u);
  EXPECT_EQ(rest->epochs_done(), 3);
  EXPECT_EQ(rest->epoch_steps_done(), 0);
  EXPECT_EQ(error_of([&] { job(sgd)->run_steps(-1); }).first, ErrorCode::kUsage);
  // the weights alone from a checkpoint written within an epoch
  auto part = job(sgd);
  part->run_steps(3);
  part->save_checkpoint(path);
  auto other = job(Adam(), 20, 9, 1);
  other->load_checkpoint(path, /*weights_only=*/true);
  EXPECT_EQ(other->read_param(0, "weight"), part->read_param(0, "weight"));
  EXPECT_EQ(other->epoch_steps_done(), 0);
  fs::remove(path);
}

// The weights-only form: another job with the same model (another batch and optimizer) takes the master
// weights and batchnorm statistics, and keeps its own optimizer state and counters.
TEST(Checkpoint, WeightsOnlyLoadIntoAnotherJobOfTheSameModel) {
  const std::string path = (fs::temp_directory_path() / "fresco_resume_weights.ckpt").string();
  auto a = job(SGD(0.9f).base_lr(0.05f));
  a->run(2);
  a->save_checkpoint(path);
  auto b = job(Adam(), 20, 9, 1);  // another optimizer, batch, seed and a shorter run
  b->load_checkpoint(path, /*weights_only=*/true);
  EXPECT_EQ(b->epochs_done(), 0);
  EXPECT_EQ(b->read_param(0, "weight"), a->read_param(0, "weight"));
  EXPECT_EQ(b->read_param(1, "running_var"), a->read_param(1, "running_var"));
  EXPECT_NEAR(b->evaluate().loss, a->evaluate().loss, 1e-6);  // (evaluated in batches of 20 and of 16)
  EXPECT_EQ(b->run().epochs.size(), 1u);                      // its own epoch, from those weights
  fs::remove(path);
}

TEST(Checkpoint, AnotherJobsCheckpointIsRefusedBeforeAnythingIsWritten) {
  const std::string path = (fs::temp_directory_path() / "fresco_resume_other.ckpt").string();
  const Optimizer sgd = SGD().base_lr(0.05f);
  auto a = job(sgd);
  a->run(1);
  a->save_checkpoint(path);
  auto other_batch = job(sgd, 20);
  const auto before = other_batch->snapshot();
  const auto [code, what] = error_of([&] { other_batch->load_checkpoint(path); });
  EXPECT_EQ(code, ErrorCode::kBadConfig);
  EXPECT_NE(what.find("was written by another job: batch 16 there, 20 here"), std::string::npos) << what;
  EXPECT_EQ(other_batch->snapshot(), before);
  EXPECT_EQ(other_batch->epochs_done(), 0);
  EXPECT_NE(error_of([&] { job(sgd, 16, 4)->load_checkpoint(path); }).second.find("seed 3 there, 4 here"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { job(Adam())->load_checkpoint(path); }).first, ErrorCode::kBadConfig);
  // a setting inside the optimizer is named
  EXPECT_NE(error_of([&] {
              job(SGD(0.5f).base_lr(0.05f))->load_checkpoint(path);
            }).second.find("optimizer.momentum 0.0 there, 0.5 here"),
            std::string::npos);
  // a checkpoint holds the state at a step of run() / run_steps(): not after steps taken outside them
  std::vector<uint32_t> idx(16, 0);
  a->train_step(idx.data(), 16);
  EXPECT_EQ(error_of([&] { a->save_checkpoint(path); }).first, ErrorCode::kUsage);
  fs::remove(path);
  EXPECT_EQ(error_of([&] { a->load_checkpoint(path); }).first, ErrorCode::kMissingInput);
  EXPECT_EQ(error_of([&] { a->run(-1); }).first, ErrorCode::kUsage);
}
