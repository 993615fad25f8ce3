// Plugin loader: the CPU plugin loads; broken plugins are refused with path and reason: wrong ABI major (both
// numbers), missing entry symbol, missing dependency, duplicate kernel, a device lacking required functions,
// an init that throws, missing file; nothing crashes.
#include <gtest/gtest.h>

#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
std::string reason_for(const std::string& file) {
  for (const auto& r : PluginRegistry::instance().refused())
    if (r.path.find(file) != std::string::npos) return r.reason;
  return "<not refused>";
}
const std::string kBad = FRESCO_TEST_PLUGIN_DIR;
}  // namespace

TEST(PluginLoader, LoadsTheCpuBackend) {
  auto& reg = PluginRegistry::instance();
  reg.load_default({FRESCO_LIB_DIR});
  ASSERT_NE(reg.device("cpu"), nullptr);
  const int32_t fc = reg.op_id("fc");
  ASSERT_GE(fc, 0);
  EXPECT_NE(reg.kernel(fc, "cpu", FR_F32), nullptr);
  EXPECT_EQ(reg.kernel(fc, "cpu", FR_F16), nullptr);
  EXPECT_EQ(reg.kernel(fc, "tpu", FR_F32), nullptr);
  EXPECT_EQ(reg.op_id("no-such-op"), -1);
  bool listed = false;
  for (const auto& p : reg.loaded())
    listed |= p.name == "cpu" && p.abi_major == FR_ABI_MAJOR && p.n_kernels > 10;
  EXPECT_TRUE(listed);
}

TEST(PluginLoader, RefusesWrongAbiMajor) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-wrong_major.so"));
  const std::string r = reason_for("libfresco-test-wrong_major.so");
  EXPECT_NE(r.find("wrong ABI major: plugin has 99.0, this fresco speaks 1."), std::string::npos) << r;
}

TEST(PluginLoader, RefusesMissingEntrySymbol) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-missing_init.so"));
  EXPECT_EQ(reason_for("libfresco-test-missing_init.so"), "missing entry symbol fresco_plugin_init");
}

TEST(PluginLoader, RefusesMissingDependency) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-missing_dep.so"));
  const std::string r = reason_for("libfresco-test-missing_dep.so");
  EXPECT_NE(r.find("cannot load"), std::string::npos) << r;
  EXPECT_NE(r.find("libfresco_test_vanishing.so"), std::string::npos) << r;
}

TEST(PluginLoader, RefusesDuplicateKernel) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-duplicate_kernel.so"));
  const std::string r = reason_for("libfresco-test-duplicate_kernel.so");
  EXPECT_NE(r.find("duplicate kernel (relu, cpu, f32): already provided by"), std::string::npos) << r;
  EXPECT_NE(r.find("libfresco-cpu.so"), std::string::npos) << r;
}

TEST(PluginLoader, RefusesADeviceWithoutItsRequiredFunctions) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-incomplete_device.so"));
  const std::string r = reason_for("libfresco-test-incomplete_device.so");
  EXPECT_NE(r.find("device 'incomplete' lacks a required function"), std::string::npos) << r;
  EXPECT_EQ(PluginRegistry::instance().device("incomplete"), nullptr);
}

// ABI 1.1's collective backends: the cpu plugin's "threads" serves the cpu device; one without its functions
// is refused; an ABI 1.0 library's reserved field is ignored, whatever it holds.
TEST(PluginLoader, CollectiveBackends) {
  auto& reg = PluginRegistry::instance();
  reg.load_default({FRESCO_LIB_DIR});
  const FrCommApi* threads = reg.comm("cpu");
  ASSERT_NE(threads, nullptr);
  EXPECT_STREQ(threads->name, "threads");
  EXPECT_EQ(reg.comm("tpu"), nullptr);
  EXPECT_FALSE(reg.load_file(kBad + "/libfresco-test-incomplete_comm.so"));
  const std::string r = reason_for("libfresco-test-incomplete_comm.so");
  EXPECT_NE(r.find("FrCommApi is malformed"), std::string::npos) << r;
  EXPECT_TRUE(reg.load_file(kBad + "/libfresco-test-abi10_reserved.so"));
  EXPECT_EQ(reg.comm("cpu"), threads);
}

TEST(PluginLoader, RefusesAnInitThatThrows) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-test-throwing_init.so"));
  EXPECT_EQ(reason_for("libfresco-test-throwing_init.so"), "fresco_plugin_init threw: boom in init");
}

TEST(PluginLoader, RefusesMissingFileAndNeverSearchesRelativePaths) {
  EXPECT_FALSE(PluginRegistry::instance().load_file(kBad + "/libfresco-nothing-here.so"));
  EXPECT_EQ(reason_for("libfresco-nothing-here.so"), "file not found");
  const auto dirs = PluginRegistry::instance().search_dirs({"/explicit"});
  ASSERT_GE(dirs.size(), 3u);
  EXPECT_EQ(dirs.front().first, "/explicit");
  EXPECT_EQ(dirs.back().second, "directory of libfresco");
  for (const auto& [d, why] : dirs) EXPECT_NE(d, ".");
}
