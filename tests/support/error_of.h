// The fresco::Error a callable throws, for tests of refusals: its code and message, or {kInternal, "no
// error"} when it returns. Header-only, for every test executable.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "fresco/core/error.h"

namespace fresco::test {

inline std::pair<ErrorCode, std::string> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kInternal, "no error"};
}

}  // namespace fresco::test
