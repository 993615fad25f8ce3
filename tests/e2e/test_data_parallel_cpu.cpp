// Data parallelism on the CPU (DeepLearningTask::ranks; the "threads" collective backend): two ranks, each
// with half of every step's batch (PyTorch's DistributedSampler split of the same order), train an MLP to
// the weights of one rank with the whole batch within float rounding (the mean gradient added in another
// order), every rank holds the same bits after every step, runs repeat bit for bit, a residual network with
// batchnorm trains on three ranks over an epoch that does not split evenly, a checkpoint resumes the ranks,
// and the settings it cannot honour are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/temp_dir.h"
#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "support/error_of.h"
#include "support/relative_difference.h"

using namespace fresco;

namespace {
using State = std::vector<std::pair<std::string, std::vector<float>>>;

const data::Dataset& samples(int64_t n) {
  static const data::Dataset all = data::load_mnist_dir(e2e::kFashionDir, "train", "f");
  static std::map<int64_t, data::Dataset> cut;
  auto it = cut.find(n);
  if (it == cut.end()) it = cut.emplace(n, e2e::first_samples(all, n)).first;
  return it->second;
}

std::unique_ptr<DeepLearningTask> mlp(int32_t ranks, int64_t n = 512) {
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({flatten(), fc(64), relu(), fc(10)}))
      .data(samples(n), samples(100))
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .epochs(2)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .device("cpu")
      .seed(3)
      .ranks(ranks);
  return t;
}

void expect_same_bits(const State& a, const State& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first) << what;
    EXPECT_EQ(std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)), 0)
        << what << ": " << a[i].first;
  }
}
}  // namespace

TEST(DataParallelCpu, TwoRanksTrainAsOneWithTheWholeBatch) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  auto one = mlp(1), two = mlp(2);
  one->compile();
  two->compile();
  EXPECT_EQ(two->steps_per_epoch(), one->steps_per_epoch());  // 8 steps of 64 (32 a rank)
  const TrainingResult r1 = one->run(), r2 = two->run();
  ASSERT_EQ(r2.epochs.size(), 2u);
  const State s1 = one->snapshot(), s2 = two->snapshot();
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) {
    if (s1[i].first.rfind("G(", 0) == 0) continue;  // the last step's: in the weights below
    EXPECT_LT(test::relative_difference(s2[i].second, s1[i].second), 1e-5) << s1[i].first;
  }
  EXPECT_NEAR(r2.epochs[1].test_acc, r1.epochs[1].test_acc, 0.011);  // within a sample or so of 100
  expect_same_bits(two->snapshot_of_rank(1), s2, "rank 1 against rank 0");
  auto again = mlp(2);  // the threads' timing does not change a bit
  again->compile();
  again->run();
  expect_same_bits(again->snapshot(), s2, "a second run");
}

TEST(DataParallelCpu, ResidualNetworkOnThreeRanksWithAnUnevenEpoch) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  DeepLearningTask t;  // 200 samples on 3 ranks: 67 each (the start repeated), steps of 16 a rank, last 3
  t.model(seq({conv(8, 3, 1, 1), bn(), relu(),
               residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(), maxpool(2),
               conv(16, 3, 1, 1), bn(), relu(), gap(), fc(10)}))
      .data(samples(200), samples(100))
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(48)
      .epochs(2)
      .optimizer(SGD(0.9f, true).base_lr(0.05f))
      .device("cpu")
      .seed(5)
      .ranks(3);
  t.compile();
  EXPECT_EQ(t.steps_per_epoch(), 5);
  const TrainingResult r = t.run();
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_TRUE(std::isfinite(r.epochs[1].train_loss));
  EXPECT_LT(r.epochs[1].train_loss, r.epochs[0].train_loss);
  for (int32_t k = 1; k < 3; ++k)
    expect_same_bits(t.snapshot_of_rank(k), t.snapshot(), "rank " + std::to_string(k) + " against rank 0");
}

TEST(DataParallelCpu, ACheckpointResumesEveryRank) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  test::TempDir dir;
  const std::string path = dir.file("ranks.ckpt");
  auto whole = mlp(2);
  whole->compile();
  whole->run_steps(5);  // within the first epoch
  whole->save_checkpoint(path);
  whole->run();
  auto resumed = mlp(2);
  resumed->compile();
  resumed->load_checkpoint(path);
  resumed->run();
  expect_same_bits(resumed->snapshot(), whole->snapshot(), "resumed");
  expect_same_bits(resumed->snapshot_of_rank(1), whole->snapshot(), "resumed rank 1");
  auto single = mlp(1);  // one rank splits the epoch otherwise: another job
  single->compile();
  const auto [code, what] = test::error_of([&] { single->load_checkpoint(path); });
  EXPECT_EQ(code, ErrorCode::kBadConfig);
  EXPECT_NE(what.find("ranks 2 there"), std::string::npos) << what;
}

// The epoch's end is a meeting of the ranks: the report adds up every rank's train metrics, and the
// callback runs before any rank starts the next epoch, so what it writes reaches every rank before its next
// step; an error in it stops every rank, which then refuse to train or save.
TEST(DataParallelCpu, TheEpochsEndIsAMeetingOfTheRanks) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  auto t = mlp(2);
  t->epochs(4);
  std::vector<EpochReport> reports;
  bool fail = false;
  std::string nested;
  t->on_epoch([&](const EpochReport& r) {
    reports.push_back(r);
    if (r.epoch == 1) t->write_param(t->layer_index("1"), "bias", std::vector<float>(64, 0.25f));
    if (r.epoch == 2)
      nested = test::error_of([&] { t->run_steps(1); }).second;  // the others wait in this run
    if (fail) throw Error(ErrorCode::kIo, "the callback failed");
  });
  t->compile();
  t->run(2);
  ASSERT_EQ(reports.size(), 2u);
  expect_same_bits(t->snapshot_of_rank(1), t->snapshot(), "after a write in the callback");
  EXPECT_NE(nested.find("from inside a run of the ranks"), std::string::npos) << nested;
  auto one = mlp(1);  // the whole epoch's loss: both ranks' samples (not rank 0's half)
  one->compile();
  const TrainingResult r1 = one->run(1);
  EXPECT_NEAR(reports[0].train_loss, r1.epochs[0].train_loss, 1e-4 * r1.epochs[0].train_loss);
  fail = true;
  const auto [code, what] = test::error_of([&] { t->run(); });
  EXPECT_EQ(code, ErrorCode::kIo);
  EXPECT_NE(what.find("rank 0: the callback failed"), std::string::npos) << what;
  const auto again = test::error_of([&] { t->run(); });
  EXPECT_EQ(again.first, ErrorCode::kUsage);
  EXPECT_NE(again.second.find("the ranks stopped after an error"), std::string::npos) << again.second;
  EXPECT_EQ(test::error_of([&] { t->save_checkpoint("/nonexistent/x.ckpt"); }).first, ErrorCode::kUsage);
}

TEST(DataParallelCpu, RefusesWhatItCannotHonour) {
  e2e::load_plugins();
  data::Dataset d;
  d.name = "tiny";
  d.n = 8, d.h = 4, d.w = 4, d.c = 1, d.num_classes = 2;
  d.images.assign(8 * 16, 7);
  d.labels.assign(8, 1);
  auto task = [&](int32_t ranks, int64_t batch) {
    auto t = std::make_unique<DeepLearningTask>();
    t->model(seq({flatten(), fc(2)})).data(d, d).batch_size(batch).device("cpu").ranks(ranks);
    return t;
  };
  EXPECT_NE(
      test::error_of([&] { task(3, 4)->plan(); }).second.find("must be 1 to 4096 and divide batch_size 4"),
      std::string::npos);
  EXPECT_NE(test::error_of([&] { task(0, 4)->plan(); }).second.find("ranks 0"), std::string::npos);
  EXPECT_NE(
      test::error_of([&] { task(2, 4)->early_update(true).plan(); }).second.find("early_update with several"),
      std::string::npos);
  EXPECT_NE(test::error_of([&] {
              task(2, 4)->device("cuda").precision(DType::F16).plan();
            }).second.find("fp16 with several ranks is not built"),
            std::string::npos);
  auto two = task(2, 4);
  two->compile();
  uint32_t idx[4] = {0, 1, 2, 3};
  EXPECT_NE(
      test::error_of([&] { two->train_step(idx, 4); }).second.find("runs one rank's step; this job has 2"),
      std::string::npos);
  EXPECT_NE(test::error_of([&] { two->snapshot_of_rank(2); }).second.find("rank 2 of 2"), std::string::npos);
  two->run();  // and it trains
}
