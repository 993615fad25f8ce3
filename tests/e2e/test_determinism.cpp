// Determinism: two runs with one seed give bitwise-identical weights and moments (dropout and shuffling
// included), whatever the thread count; another seed gives different weights.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/job.h"
#include "fresco/core/parity.h"

using namespace fresco;

namespace {
std::vector<std::pair<std::string, std::vector<float>>> train_once(uint64_t seed, size_t threads,
                                                                   bool early_update = false,
                                                                   bool defer_wgrad = false,
                                                                   bool fuse_head = false) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  static const data::Dataset train =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 1000);
  static const data::Dataset test =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "test", "f"), 200);
  DeepLearningTask t;
  t.model(seq({fc(96), relu(), dropout(0.2f), fc(48), relu(), fc(10)}))
      .data(train, test)
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .epochs(2)
      .optimizer(AdamW().with_weight_decay(1e-4f))
      .scheduler(CosineAnnealingLR().warmup(1))
      .loss(CrossEntropyLoss().label_smoothing(0.1f))
      .device("cpu")
      .early_update(early_update)  // forced on or off (AUTO would leave these small layers off)
      .defer_fc_weight_gradients(defer_wgrad, 0)  // these layers are small: defer whatever the size
      .fuse_head(fuse_head)
      .seed(seed);
  t.compile();
  EXPECT_EQ(t.compiled().arch.fused_head, fuse_head);
  t.run();
  return t.snapshot();
}
// Every tensor of two snapshots has the same bits; `what` names the difference in a failure.
void expect_same_bits(const std::vector<std::pair<std::string, std::vector<float>>>& a,
                      const std::vector<std::pair<std::string, std::vector<float>>>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].second.size(), b[i].second.size());
    EXPECT_EQ(0, std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)))
        << a[i].first << " differs " << what;
  }
}
}  // namespace

TEST(Determinism, SameSeedSameBitsAcrossThreadCounts) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  const auto a = train_once(7, 2);
  const auto b = train_once(7, 1);
  const auto c = train_once(8, 2);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  bool any_diff_other_seed = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second.size(), b[i].second.size());
    EXPECT_EQ(0, std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)))
        << a[i].first << " differs between two runs with the same seed";
    any_diff_other_seed |=
        std::memcmp(a[i].second.data(), c[i].second.data(), a[i].second.size() * sizeof(float)) != 0;
  }
  EXPECT_TRUE(any_diff_other_seed);
}

// Updating the deep layers' parameters early (beside the first layer's backward) changes where the update
// runs, not what it computes: the same bits as one update after the whole backward.
TEST(Determinism, EarlyUpdateGivesTheSameBits) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  expect_same_bits(train_once(7, 2, true), train_once(7, 2, false), "with the early update");
}

// Deferring the fc weight gradients reorders independent nodes only: the same bits.
TEST(Determinism, DeferredFcWeightGradientsGiveTheSameBits) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  expect_same_bits(train_once(7, 2, false, true), train_once(7, 2, false, false),
                   "with deferred weight gradients");
}

// The fused head (fc + loss + input gradient + the previous relu mask in one node) computes the same bits as
// the separate nodes, over whole epochs (memory plan and node order included).
TEST(Determinism, FusedHeadGivesTheSameBits) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  for (bool defer : {false, true})
    expect_same_bits(train_once(7, 2, false, defer, true), train_once(7, 2, false, defer, false),
                     std::string("with the fused head (defer ") + (defer ? "1)" : "0)"));
}

TEST(NodeParity, SameDeviceAgreesNodeByNode) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  JobSpec job = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/mlp_fashion_mnist.json");
  const NodeParityReport r = run_parity_nodes(job, "cpu", "cpu", 0.0, 1000);
  ASSERT_GE(r.rows.size(), 10u);
  EXPECT_EQ(r.first_divergent, -1);
  EXPECT_EQ(r.rows.front().node, "normalize_input (normalize)");
  EXPECT_EQ(r.rows.back().graph, "OPTIMIZER");
}
