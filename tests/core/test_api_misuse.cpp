// The C++ API used wrongly gives one clear fresco::Error, never a crash or a silent wrong result: datasets
// built by hand that break their invariants, a second run(), an empty train_step, a negative evaluation
// batch; in SimpleTask an operand of the wrong dtype, a range whose regions are reversed or that wraps, and a
// graph id out of range; a kernel asking for an absurd workspace. Runs on the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"
#include "support/error_of.h"

using namespace fresco;
using fresco::test::error_of;

namespace {
std::unique_ptr<DeepLearningTask> small_task(data::Dataset train, data::Dataset test) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  auto t = std::make_unique<DeepLearningTask>();
  t->model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(std::move(train), std::move(test))
      .batch_size(16)
      .device("cpu");
  return t;
}

GraphNode compute_node(const std::string& op, TensorId in, TensorId out) {
  GraphNode n;
  n.op = op;
  n.in = {in};
  n.out = {out};
  return n;
}

void expect_error(const std::function<void()>& f, ErrorCode code, const std::string& needle) {
  const auto [c, what] = error_of(f);
  EXPECT_EQ(c, code) << what;
  EXPECT_NE(what.find(needle), std::string::npos) << what;
}
}  // namespace

TEST(ApiMisuse, HandBuiltDatasetsMustKeepTheirInvariants) {
  auto broken = [](const std::function<void(data::Dataset&)>& edit, bool test_set = false) {
    data::Dataset train = data::synthetic_patches(64, 1), test = data::synthetic_patches(32, 2);
    edit(test_set ? test : train);
    auto t = small_task(train, test);
    return error_of([&] { t->plan(); });
  };
  auto expect = [](const std::pair<ErrorCode, std::string>& e, const std::string& needle) {
    EXPECT_EQ(e.first, ErrorCode::kBadData) << e.second;
    EXPECT_NE(e.second.find(needle), std::string::npos) << e.second;
  };
  expect(broken([](data::Dataset& d) { d.n = 1'000'000; }),
         "4096 image bytes for n x h x w x c = 1000000 x 64");
  expect(broken([](data::Dataset& d) { d.images.resize(100); }), "100 image bytes");
  expect(broken([](data::Dataset& d) { d.labels.pop_back(); }), "63 labels for 64 images");
  expect(broken([](data::Dataset& d) { d.labels[5] = 7; }, true), "label 7 of sample 5 is outside [0, 4)");
  expect(broken([](data::Dataset& d) { d.labels[0] = -1; }), "label -1 of sample 0");
  expect(broken([](data::Dataset& d) { d.n = -3; }, true), "n = -3 is outside");
  expect(broken([](data::Dataset& d) { d.num_classes = 0; }), "num_classes must be at least 1");
  expect(broken([](data::Dataset& d) { d.c = 0; }), "image shape 8x8x0");
  expect(broken([](data::Dataset& d) { d.num_classes = 5; }, true), "has 5 classes, training set");
  auto ok = small_task(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2));
  EXPECT_NO_THROW(ok->plan());
}

TEST(ApiMisuse, RunOnceAndNoEmptySteps) {
  auto t = small_task(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2));
  t->compile();
  expect_error([&] { t->train_step(nullptr, 16); }, ErrorCode::kUsage, "no index array");
  std::vector<uint32_t> idx(16);
  std::iota(idx.begin(), idx.end(), 0u);
  expect_error([&] { t->train_step(idx.data(), 0); }, ErrorCode::kUsage, "needs at least one sample index");
  EXPECT_NO_THROW(t->run());
  expect_error([&] { t->run(); }, ErrorCode::kUsage, "epochs of this job have been run");
  // without a test set the test figures are NaN, not a 0% accuracy
  auto untested = small_task(data::synthetic_patches(64, 1), data::Dataset{});
  untested->compile();
  const TrainingResult r = untested->run();
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_TRUE(std::isnan(r.epochs[0].test_acc) && std::isnan(r.epochs[0].test_loss));
  EXPECT_TRUE(std::isnan(r.final_test_acc));
  EXPECT_GT(r.epochs[0].train_loss, 0.0);
  auto negative = small_task(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2));
  negative->val_batch_size(-4);
  expect_error([&] { negative->plan(); }, ErrorCode::kBadConfig, "val_batch_size must be 0");
}

TEST(ApiMisuse, SimpleTaskOperandsRangesAndGraphIds) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  {  // a u8 input of a relu chosen for its f32 output would be read 4x past its end
    SimpleTask t("cpu");
    const TensorId y = t.tensor(Region::F_FP32, DType::F32, Shape{1, 1, 1, 1024}, "y");
    const TensorId x = t.tensor(Region::R_RESULTS, DType::U8, Shape{1, 1, 1, 1024}, "x");
    t.lock_memory();
    t.add(GraphId::DEEP_FWD_BWD, compute_node("relu", x, y));
    expect_error([&] { t.add(GraphId::COUNT, GraphNode{}); }, ErrorCode::kUsage, "is not a GraphId");
    t.compile();
    expect_error([&] { t.run(GraphId::COUNT); }, ErrorCode::kUsage, "is not a GraphId");
    const auto [code, what] = error_of([&] { t.run(GraphId::DEEP_FWD_BWD); });
    EXPECT_NE(what.find("an operand read as f32 has dtype 5"), std::string::npos) << what;
  }
  auto range_error = [](const RangeRef& r) {
    SimpleTask t("cpu");
    t.tensor(Region::F_FP32, DType::F32, Shape{1, 1, 1, 64}, "y");
    t.lock_memory();
    GraphNode clear;
    clear.kind = NodeKind::RANGE;
    clear.op = "clear";
    clear.rout = {r};
    t.add(GraphId::OPTIMIZER, clear);
    return error_of([&] { t.compile(); });
  };
  auto reversed = range_error(RangeRef::regions(Region::T_TEMP, Region::S_SCALARS));
  EXPECT_EQ(reversed.first, ErrorCode::kUsage);
  EXPECT_NE(reversed.second.find("first must not come after the last"), std::string::npos) << reversed.second;
  auto wraps =
      range_error(RangeRef::part(Region::F_FP32, Region::F_FP32, (uint64_t{1} << 63) + 256, INT64_MAX));
  EXPECT_EQ(wraps.first, ErrorCode::kUsage);
  EXPECT_NE(wraps.second.find("lies outside its regions"), std::string::npos) << wraps.second;
}

// A kernel's workspace request beyond 2^40 bytes is refused at prepare, naming the node.
TEST(ApiMisuse, AbsurdWorkspaceRequestIsRefused) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  ASSERT_TRUE(PluginRegistry::instance().load_file(std::string(FRESCO_TEST_PLUGIN_DIR) +
                                                   "/libfresco-test-huge_workspace.so"));
  SimpleTask t("cpu");
  const TensorId x = t.tensor(Region::F_FP32, DType::F32, Shape{1, 1, 1, 64}, "x");
  t.lock_memory();
  t.add(GraphId::DEEP_FWD_BWD, compute_node("huge_workspace", x, x));
  expect_error([&] { t.compile(); }, ErrorCode::kBadConfig,
               "asks for a workspace of 18446744073709551600 bytes");
}
