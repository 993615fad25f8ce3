// Progressive resolution on the CPU (DeepLearningTask::progressive_resolution): the begin stage trains with
// the bits of the same job on images resized beforehand (a compile at that size), including its last
// partial batch; the end stage continues from that state with the bits of the job at the end size; the
// evaluations run at the data's size; a checkpoint resumes it, and one of another schedule is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/temp_dir.h"
#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"

using namespace fresco;

namespace {
using State = std::vector<std::pair<std::string, std::vector<float>>>;

const data::Dataset& train_set() {  // 200 samples: batches of 64, 64, 64 and 8
  static const data::Dataset d =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 200);
  return d;
}
const data::Dataset& test_set() {
  static const data::Dataset d = e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "test", "f"), 100);
  return d;
}

void configure(DeepLearningTask& t, data::Dataset train, data::Dataset test) {
  t.model(seq({conv(8, 3, 1, 1), bn(), relu(),
               residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(), maxpool(2),
               conv(16, 3, 1, 1), bn(), relu(), gap(), fc(10)}))
      .data(std::move(train), std::move(test))
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(64)
      .epochs(2)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .scheduler(ConstantLR())
      .loss(CrossEntropyLoss().label_smoothing(0.1f))
      .device("cpu")
      .seed(5)
      .shuffle(false);  // epoch 2 of one job and epoch 1 of another see the same order
}

ProgressiveResolution stages(int64_t begin, int64_t end_h, int64_t end_w) {
  ProgressiveResolution p;
  p.begin_h = p.begin_w = begin;
  p.end_h = end_h;
  p.end_w = end_w;
  p.begin_epochs = 1;
  return p;
}

void expect_same_bits(const State& a, const State& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first) << what;
    ASSERT_EQ(a[i].second.size(), b[i].second.size()) << what << " " << a[i].first;
    EXPECT_EQ(std::memcmp(a[i].second.data(), b[i].second.data(), a[i].second.size() * sizeof(float)), 0)
        << what << ": " << a[i].first << " differs";
  }
}
}  // namespace

TEST(ProgressiveResolution, EachStageTrainsAsTheJobAtItsSize) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  DeepLearningTask p;
  configure(p, train_set(), test_set());
  p.progressive_resolution(stages(14, 20, 18));
  p.compile();
  const TrainingResult first = p.run(1);
  const State after_begin = p.snapshot();

  DeepLearningTask small;  // the begin stage's size, images resized beforehand
  configure(small, e2e::resized(train_set(), 14, 14), e2e::resized(test_set(), 14, 14));
  small.compile();
  small.run(1);
  const State small_state = small.snapshot();
  expect_same_bits(after_begin, small_state, "the begin stage");

  const TrainingResult second = p.run(1);
  DeepLearningTask end;  // the end stage's size, from the begin stage's state
  configure(end, e2e::resized(train_set(), 20, 18), e2e::resized(test_set(), 20, 18));
  end.compile();
  end.restore(small_state);
  end.run(1);
  expect_same_bits(p.snapshot(), end.snapshot(), "the end stage");
  // the two stages trained on other images: the weights moved in each
  EXPECT_NE(std::memcmp(after_begin[0].second.data(), p.snapshot()[0].second.data(),
                        after_begin[0].second.size() * sizeof(float)),
            0);
  // evaluated at the data's 28 x 28 after each epoch
  ASSERT_EQ(first.epochs.size(), 1u);
  ASSERT_EQ(second.epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(first.epochs[0].test_acc) && first.epochs[0].test_acc > 0.1);
  EXPECT_TRUE(std::isfinite(second.epochs[0].test_acc) && second.epochs[0].test_acc > 0.1);
  EXPECT_EQ(p.evaluate().samples, 100);
}

TEST(ProgressiveResolution, ACheckpointResumesTheSchedule) {
  FRESCO_REQUIRE_FASHION_MNIST();
  e2e::load_plugins();
  test::TempDir dir;
  const std::string path = dir.file("progressive.ckpt");
  DeepLearningTask whole;
  configure(whole, train_set(), test_set());
  whole.progressive_resolution(stages(14, 0, 0));  // then the data's 28 x 28
  whole.compile();
  whole.run(1);
  whole.save_checkpoint(path);
  whole.run(1);

  DeepLearningTask resumed;
  configure(resumed, train_set(), test_set());
  resumed.progressive_resolution(stages(14, 0, 0));
  resumed.compile();
  resumed.load_checkpoint(path);
  resumed.run();
  expect_same_bits(whole.snapshot(), resumed.snapshot(), "resumed");

  auto expect_refused = [&](DeepLearningTask& t, const char* what) {
    configure(t, train_set(), test_set());
    t.compile();
    try {
      t.load_checkpoint(path);
      ADD_FAILURE() << what << " was loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("progressive_resolution"), std::string::npos) << e.what();
    }
  };
  DeepLearningTask other;  // another begin size: another job
  other.progressive_resolution(stages(16, 0, 0));
  expect_refused(other, "a checkpoint of another schedule");
  DeepLearningTask none;  // no progressive resolution at all
  expect_refused(none, "a checkpoint with stages, into a job without,");
  DeepLearningTask same;  // the data's size written out (28 x 28) is the same job as 0, "the data's"
  configure(same, train_set(), test_set());
  same.progressive_resolution(stages(14, 28, 28));
  same.compile();
  same.load_checkpoint(path);
  same.run();
  expect_same_bits(whole.snapshot(), same.snapshot(), "resumed with the end size written out");
}

TEST(ProgressiveResolution, RefusesSchedulesItCannotRun) {
  auto error_of = [](ProgressiveResolution pr) -> std::string {
    DeepLearningTask t;
    data::Dataset d;
    d.name = "tiny";
    d.n = 8, d.h = 8, d.w = 8, d.c = 1, d.num_classes = 2;
    d.images.assign(8 * 64, 0);
    d.labels.assign(8, 0);
    t.model(seq({conv(4, 3, 1, 1), relu(), gap(), fc(2)})).data(d, d).batch_size(4).epochs(2).device("cpu");
    t.progressive_resolution(pr);
    try {
      t.plan();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  ProgressiveResolution late = stages(4, 0, 0);
  late.begin_epochs = 2;
  EXPECT_NE(error_of(late).find("leaves no epoch of the job's 2 at the end resolution"), std::string::npos);
  EXPECT_NE(error_of(stages(9, 0, 0)).find("begin height must be in [1, 8]"), std::string::npos);
  ProgressiveResolution off;
  off.begin_h = 4;
  EXPECT_NE(error_of(off).find("begin_epochs must be 1 or more"), std::string::npos);
}
