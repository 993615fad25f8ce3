// Phase discipline: PLANNING -> MEMORY_LOCKED -> COMPILED; any call in the wrong phase is a kUsage error that
// names both phases.
#include <gtest/gtest.h>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"

using namespace fresco;

namespace {
void expect_phase_error(const std::function<void()>& f, const std::string& expected_phase) {
  try {
    f();
    FAIL() << "no phase error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("only in phase " + expected_phase), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Phases, SimpleTaskEnforcesOrder) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  SimpleTask t("cpu");
  EXPECT_EQ(t.phase(), Phase::PLANNING);
  const TensorId x = t.tensor(Region::F_FP32, DType::F32, Shape{2, 1, 1, 3}, "x");
  expect_phase_error([&] { t.add(GraphId::DEEP_FWD_BWD, GraphNode{}); }, "MEMORY_LOCKED");
  expect_phase_error([&] { t.run(GraphId::DEEP_FWD_BWD); }, "COMPILED");
  expect_phase_error([&] { t.compile(); }, "MEMORY_LOCKED");
  t.lock_memory();
  EXPECT_EQ(t.phase(), Phase::MEMORY_LOCKED);
  expect_phase_error([&] { t.tensor(Region::F_FP32, DType::F32, Shape{1, 1, 1, 1}, "late"); }, "PLANNING");
  GraphNode n;
  n.op = "relu";
  n.in = {x};
  n.out = {x};
  t.add(GraphId::DEEP_FWD_BWD, n);
  expect_phase_error([&] { t.write(x, std::vector<float>{1, 2, 3, 4, 5, 6}); }, "COMPILED");
  t.compile();
  EXPECT_EQ(t.phase(), Phase::COMPILED);
  expect_phase_error([&] { t.add(GraphId::DEEP_FWD_BWD, n); }, "MEMORY_LOCKED");
  expect_phase_error([&] { t.lock_memory(); }, "PLANNING");
  t.write(x, std::vector<float>{1, -2, 3, -4, 5, -6});
  t.run(GraphId::DEEP_FWD_BWD);
  EXPECT_EQ(t.read<float>(x, 6), (std::vector<float>{1, 0, 3, 0, 5, 0}));
}

TEST(Phases, DeepLearningTaskEnforcesOrder) {
  DeepLearningTask t;
  expect_phase_error([&] { t.run(); }, "COMPILED");
  expect_phase_error([&] { t.evaluate(); }, "COMPILED");
  expect_phase_error([&] { t.read_param(0, "weight"); }, "COMPILED");
  // A task whose compile failed stays in PLANNING.
  EXPECT_THROW(t.compile(), Error);  // no model
  EXPECT_EQ(t.phase(), Phase::PLANNING);
}

TEST(Phases, UnknownDeviceIsAClearError) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  try {
    SimpleTask t("tpu");
    t.lock_memory();
    t.compile();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_NE(std::string(e.what()).find("no plugin provides device 'tpu'"), std::string::npos) << e.what();
  }
}
