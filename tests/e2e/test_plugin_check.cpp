// fresco-plugin-check: passes on the shipped CPU plugin (every kernel against the references), and fails with
// a clear message on deliberately broken plugins: wrong result (a relu that writes nothing), wrong
// struct_size, missing kernel table, wrong ABI major.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {
struct CheckRun {
  int status = -1;
  std::string out;
};
CheckRun check(const std::string& plugin) {
  const std::string cmd = "FRESCO_LOG=warn timeout 120 " + std::string(FRESCO_BIN_DIR) +
                          "/fresco-plugin-check " + plugin + " 2>&1";
  CheckRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[512];
  while (fgets(buf, sizeof buf, f)) r.out += buf;
  const int rc = pclose(f);
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return r;
}
const std::string kBad = FRESCO_TEST_PLUGIN_DIR;
}  // namespace

TEST(PluginCheck, ShippedCpuPluginPasses) {
  const CheckRun r = check(std::string(FRESCO_LIB_DIR) + "/libfresco-cpu.so");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("adam_update [cpu]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(PluginCheck, WrongResultFails) {
  const CheckRun r = check(kBad + "/libfresco-test-duplicate_kernel.so");  // its relu writes nothing
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("relu [cpu]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL   max rel err inf"), std::string::npos) << r.out;
}

TEST(PluginCheck, WrongStructSizeFails) {
  const CheckRun r = check(kBad + "/libfresco-test-bad_struct_size.so");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("kernel table entry 0 is malformed (struct_size 8"), std::string::npos) << r.out;
}

TEST(PluginCheck, MissingKernelTableFails) {
  const CheckRun r = check(kBad + "/libfresco-test-missing_kernel.so");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("n_kernels is 1 but no table"), std::string::npos) << r.out;
}

TEST(PluginCheck, WrongAbiMajorAndUsage) {
  const CheckRun r = check(kBad + "/libfresco-test-wrong_major.so");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("wrong ABI major: plugin has 99.0"), std::string::npos) << r.out;
  EXPECT_EQ(check("").status, 64);
}
