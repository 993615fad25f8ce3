// CUDA batchnorm_add: a batchnorm computed by the residual join that is its only reader, y = bn(x) + r, then
// the join's relu (params.relu); training only (sdk/include/fresco/ops.h). One element-wise pass writes the
// join's output, so the batchnorm's own output is neither written nor read back; with a fourth output it also
// writes y's even rows and columns there (ops.h, the subsampled output). Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU).
#include "fresco/batchnorm_add_checks.hpp"
#include "ops/batchnorm_forward.h"

namespace fresco::cuda {

FR_CUDA_KERNEL_PREPARE(batchnorm_add) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    const FrCall c = sdk::without_subsample(call);
    *workspace_bytes = batchnorm_workspace(&c);
  });
}

FR_CUDA_KERNEL_RUN(batchnorm_add) {
  return sdk::guard([&] {
    const FrTensor* y2 = sdk::check_batchnorm_add(call);
    const FrCall c = sdk::without_subsample(call);
    run_batchnorm(ctx, &c, call->in[3].data, 4, "batchnorm_add", y2);
  });
}

}  // namespace fresco::cuda
