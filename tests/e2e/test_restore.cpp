// DeepLearningTask::restore: a job started from another run's snapshot trains on as that run does, a state
// of another job is refused; and parity's --resync, which restores the second device before every step.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/job.h"
#include "fresco/core/parity.h"

using namespace fresco;

namespace {
using State = std::vector<std::pair<std::string, std::vector<float>>>;

// A small MLP with AdamW (moments in M and V) on the first Fashion-MNIST samples, compiled on the CPU.
std::unique_ptr<DeepLearningTask> make_task(uint64_t seed, int hidden = 64) {
  static const data::Dataset train =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 512);
  static const data::Dataset test =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "test", "f"), 128);
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({fc(hidden), relu(), fc(10)}))
      .data(train, test)
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .optimizer(AdamW().with_weight_decay(1e-4f))
      .loss(CrossEntropyLoss())
      .device("cpu")
      .seed(seed);
  t->compile();
  return t;
}

bool same_bits(const State& a, const State& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.size() != b[i].second.size() ||
        std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)) != 0)
      return false;
  return true;
}
}  // namespace

TEST(Restore, RestoredStateTrainsAsTheRunItCameFrom) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  std::vector<uint32_t> idx(256);
  std::iota(idx.begin(), idx.end(), 0u);
  auto a = make_task(7), b = make_task(8);  // other initial weights
  for (int s = 0; s < 2; ++s) {
    a->train_step(idx.data() + 64 * s, 64);
    b->train_step(idx.data() + 64 * (s + 1), 64);  // and other batches
  }
  const State sa = a->snapshot();
  ASSERT_FALSE(same_bits(sa, b->snapshot()));
  b->restore(sa);
  EXPECT_TRUE(same_bits(sa, b->snapshot()));
  // Two more steps (the moments and the step counters agree too): the same loss and state bits.
  for (int s = 2; s < 4; ++s) {
    const float la = a->train_step(idx.data() + 64 * s, 64);
    const float lb = b->train_step(idx.data() + 64 * s, 64);
    EXPECT_EQ(0, std::memcmp(&la, &lb, sizeof la)) << "step " << s << ": " << la << " vs " << lb;
  }
  EXPECT_TRUE(same_bits(a->snapshot(), b->snapshot()));
}

TEST(Restore, RefusesAStateOfAnotherJob) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  auto a = make_task(7), wider = make_task(7, 96);
  const State sa = a->snapshot();
  EXPECT_THROW(wider->restore(sa), Error);  // sizes differ
  State renamed = sa;
  renamed[0].first += "x";
  EXPECT_THROW(a->restore(renamed), Error);
  State shorter(sa.begin(), sa.end() - 1);
  EXPECT_THROW(a->restore(shorter), Error);
  State longer = make_task(8)->snapshot();  // another start, one tensor too many: nothing is written
  longer.push_back(sa.back());
  EXPECT_THROW(a->restore(longer), Error);
  EXPECT_TRUE(same_bits(sa, a->snapshot()));
  State bad_last = make_task(8)->snapshot();  // a wrong size in the last tensor only: nothing is written
  bad_last.back().second.pop_back();
  EXPECT_THROW(a->restore(bad_last), Error);
  EXPECT_TRUE(same_bits(sa, a->snapshot()));
  a->restore(sa);  // and the job's own state is accepted
  EXPECT_TRUE(same_bits(sa, a->snapshot()));
}

// Resynced parity: device B initialised from another seed differs from A free-running, and agrees with it
// bit for bit at every step when each step starts from A's state (the first included).
TEST(Parity, ResyncedComparesEveryStepFromTheFirstDevicesState) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  JobSpec job = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/mlp_fashion_mnist.json");
  const ParityReport apart = run_parity(job, 3, "cpu", "cpu", 1000, false, job.seed + 1);
  EXPECT_FALSE(apart.resync);
  EXPECT_EQ(apart.step_worst.size(), 1u);  // compared after the last step only
  EXPECT_GT(apart.worst, 1e-3);
  EXPECT_NE(apart.loss_a[0], apart.loss_b[0]);
  const ParityReport r = run_parity(job, 3, "cpu", "cpu", 1000, true, job.seed + 1);
  EXPECT_TRUE(r.resync);
  ASSERT_EQ(r.step_worst.size(), 3u);
  ASSERT_EQ(r.loss_a.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(r.step_worst[s], 0.0) << "step " << s;
    EXPECT_EQ(r.loss_a[s], r.loss_b[s]) << "step " << s;
  }
  EXPECT_EQ(r.worst_max, 0.0);
  ASSERT_FALSE(r.rows.empty());
  EXPECT_EQ(r.rows.back().tensor, "loss");
}
