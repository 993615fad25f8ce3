// CUDA range op copy: cudaMemcpyAsync with the direction inferred from the pointers (pinned staging -> arena
// for TRANSFER_A/B, arena -> arena otherwise); captured as a memcpy node. Sizes must match. Test:
// tests/plugins/cuda.
#include "cuda_common.h"

namespace fresco::cuda {

FR_CUDA_KERNEL_RUN(copy) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 0, 0, 1, 1, "copy");
    FR_PLUGIN_CHECK(call->rin[0].bytes == call->rout[0].bytes, FR_ERR_INVALID_ARGUMENT,
                    "copy: source has " + std::to_string(call->rin[0].bytes) + " bytes, destination " +
                        std::to_string(call->rout[0].bytes));
    FR_CUDA_CHECK(cudaMemcpyAsync(call->rout[0].data, call->rin[0].data, call->rin[0].bytes,
                                  cudaMemcpyDefault, stream_of(call)));
  });
}

}  // namespace fresco::cuda
