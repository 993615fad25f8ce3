// An environment variable set for a scope and restored (or unset) after it: tests of switches that kernels
// and the runtime read when a job is prepared (FRESCO_CUDA_*, FRESCO_CPU_XNNPACK, ...).
#pragma once

#include <cstdlib>
#include <string>

namespace fresco::test {

struct ScopedEnv {
  std::string name, old;
  bool had = false;
  ScopedEnv(const std::string& n, const std::string& v) : name(n) {
    if (const char* o = std::getenv(n.c_str())) old = o, had = true;
    setenv(n.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace fresco::test
