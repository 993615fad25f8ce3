// The message of the kBadConfig error f throws (a test failure when it throws none, or another code).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "fresco/core/error.h"

namespace fresco::test {

inline std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

}  // namespace fresco::test
