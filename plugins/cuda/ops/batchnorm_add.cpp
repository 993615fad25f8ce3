// CUDA batchnorm_add: a batchnorm computed by the residual join that is its only reader, y = bn(x) + r, then
// the join's relu (params.relu); training only (sdk/include/fresco/ops.h). One element-wise pass writes the
// join's output, so the batchnorm's own output is neither written nor read back. Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU).
#include "fresco/batchnorm_add_checks.hpp"
#include "ops/batchnorm_forward.h"

namespace fresco::cuda {

FR_CUDA_KERNEL_PREPARE(batchnorm_add) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    *workspace_bytes = batchnorm_workspace(call);
  });
}

FR_CUDA_KERNEL_RUN(batchnorm_add) {
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    run_batchnorm(ctx, call, call->in[3].data, 4, "batchnorm_add");
  });
}

}  // namespace fresco::cuda
