// The legacy_conv test plugin (tests/plugins/testplugins): conv2d, conv2d_backward and batchnorm_backward
// kernels for f16 on the CPU written before the optional operand forms existed (FrKernelDef::flags = 0). The
// tests of those forms load it and check that a node using a form it does not declare is refused at compile
// with the flag and the way out named.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/task.h"
#include "fresco/ops.h"

namespace fresco::test {

// Loads the default plugins and legacy_conv (a file loads once a process); true when legacy_conv now owns
// conv2d for f16 on the CPU.
inline bool load_legacy_conv() {
  PluginRegistry& reg = PluginRegistry::instance();
  reg.load_default({FRESCO_LIB_DIR});
  reg.load_file(std::string(FRESCO_TEST_PLUGIN_DIR) + "/libfresco-test-legacy_conv.so");
  return reg.kernel_owner(reg.op_id(FR_OP_CONV2D), "cpu", FR_F16).find("legacy_conv") != std::string::npos;
}

// Compiling t fails with kBadConfig and a message that holds every one of `names`.
inline void expect_refused(SimpleTask& t, const std::string& what, std::initializer_list<const char*> names) {
  try {
    t.compile();
    ADD_FAILURE() << what << " compiled on a kernel that does not declare its form";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    const std::string m = e.what();
    for (const char* name : names) EXPECT_NE(m.find(name), std::string::npos) << m;
  }
}

}  // namespace fresco::test
