// CPU range op copy: rout[0] <- rin[0], byte for byte (H2D of a staged batch, labels, D2D). Sizes must match.
// Test: tests/plugins/cpu/test_range_ops.cpp.
#include <cstring>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(copy) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 1, 1, "copy");
    FR_PLUGIN_CHECK(call->rin[0].bytes == call->rout[0].bytes, FR_ERR_INVALID_ARGUMENT,
                    "copy: source has " + std::to_string(call->rin[0].bytes) + " bytes, destination " +
                        std::to_string(call->rout[0].bytes));
    std::memcpy(call->rout[0].data, call->rin[0].data, call->rin[0].bytes);
  });
}

}  // namespace fresco::cpu
