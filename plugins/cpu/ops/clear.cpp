// CPU range op clear: every byte of each output range set to zero (zero-grad, metric reset).
// Test: tests/plugins/cpu/test_range_ops.cpp.
#include <cstring>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(clear) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 0, 1, "clear");
    for (uint32_t i = 0; i < call->n_rout; ++i) {
      auto* p = static_cast<uint8_t*>(call->rout[i].data);
      parallel_chunks(static_cast<int64_t>(call->rout[i].bytes), 1 << 20,
                      [&](int64_t a, int64_t b) { std::memset(p + a, 0, static_cast<size_t>(b - a)); });
    }
  });
}

}  // namespace fresco::cpu
