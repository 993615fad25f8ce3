// CUDA range op clear: cudaMemsetAsync over every output range (captured as memset nodes). Test:
// tests/plugins/cuda.
#include "cuda_common.h"

namespace fresco::cuda {

FR_CUDA_KERNEL_RUN(clear) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 0, 0, 0, 1, "clear");
    for (uint32_t i = 0; i < call->n_rout; ++i)
      FR_CUDA_CHECK(cudaMemsetAsync(call->rout[i].data, 0, call->rout[i].bytes, stream_of(call)));
  });
}

}  // namespace fresco::cuda
