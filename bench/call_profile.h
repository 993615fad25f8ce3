// Per-call timing of a captured graph (diagnostics for the benchmark programs): each kernel call of the
// capture is run eagerly on its own, `reps` times after a warm-up, and its mean wall time is returned.
// Eager times include one host launch per call, so tiny kernels show the launch cost.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "fresco/core/runtime.h"

namespace fresco::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct CallTime {
  std::string label, op;
  double us;
};

// The calls of capture `idx`, each timed alone.
inline std::vector<CallTime> time_calls(Runtime& rt, int idx, int reps) {
  std::vector<CallTime> out;
  for (const ResolvedCall& rc : rt.capture(idx).calls) {
    Capture one;
    one.stream = rt.capture(idx).stream;
    one.calls.push_back(rc);
    one.calls.back().owns_state = false;
    ResolvedCall& c = one.calls.back();
    c.call.in = c.in.data();
    c.call.out = c.out.data();
    c.call.rin = c.rin.data();
    c.call.rout = c.rout.data();
    c.call.params = c.params.empty() ? nullptr : c.params.data();
    for (int w = 0; w < 3; ++w) rt.run_eager(one);
    rt.synchronize();
    const double t = now_s();
    for (int r = 0; r < reps; ++r) rt.run_eager(one);
    rt.synchronize();
    out.push_back({rc.label, rc.kernel ? rc.kernel->op_name : "", 1e6 * (now_s() - t) / reps});
  }
  return out;
}

}  // namespace fresco::bench
