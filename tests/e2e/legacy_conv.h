// The legacy_conv test plugin (tests/plugins/testplugins): conv2d, conv2d_backward and batchnorm_backward
// kernels for f16 on the CPU written before the optional operand forms existed (FrKernelDef::flags = 0). The
// tests of those forms load it and check that a node using a form it does not declare is refused at compile
// with the flag and the way out named.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
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

// A conv2d node (f16, 2 x 4 x 4 x 8 maps, 3x3) with the batchnorm prologue's four operands and, with
// `residual`, the join prologue's fifth, on a fresh CPU task whose compile must refuse it naming `names`.
inline void expect_prologue_conv_refused(bool residual, const std::string& what,
                                         std::initializer_list<const char*> names) {
  auto t = std::make_unique<SimpleTask>("cpu");
  auto map = [&](const char* name) { return t->tensor(Region::T_TEMP, DType::F16, Shape{2, 4, 4, 8}, name); };
  const TensorId x = map("x"), y = map("y"), a = map("applied"), r = map("residual");
  const TensorId w = t->tensor(Region::T_TEMP, DType::F16, Shape{8, 3, 3, 8}, "w");
  GraphNode n;
  n.op = FR_OP_CONV2D;
  n.label = "conv";
  n.in = {x, w};
  for (const char* name : {"gamma", "beta", "mean", "invstd"})
    n.in.push_back(t->tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 8}, name));
  if (residual) n.in.push_back(r);
  n.out = {y, a};
  n.with_params(FrConvParams{3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
  t->lock_memory();
  t->add(GraphId::DEEP_FWD_BWD, n);
  expect_refused(*t, what, names);
}

}  // namespace fresco::test
