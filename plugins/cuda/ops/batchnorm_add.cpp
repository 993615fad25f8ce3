// CUDA batchnorm_add: a batchnorm computed by the residual join that is its only reader, y = bn(x) + r, then
// the join's relu (params.relu); training only (sdk/include/fresco/ops.h). One element-wise pass writes the
// join's output, so the batchnorm's own output is neither written nor read back. Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU).
#include "ops/batchnorm_forward.h"

namespace fresco::cuda {

namespace {
void check(const FrCall* call) {
  const auto& p = sdk::params<FrBatchNormParams>(call);
  FR_PLUGIN_CHECK(p.training, FR_ERR_INVALID_ARGUMENT, "batchnorm_add: training only (params.training = 1)");
  sdk::expect_arity(call, 4, 3, 0, 2, "batchnorm_add");
  const FrTensor &x = call->in[0], &r = call->in[3];
  FR_PLUGIN_CHECK(sdk::numel(r) == sdk::numel(x) && r.dtype == x.dtype, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_add: the residual r has " + std::to_string(sdk::numel(r)) + " elements, x " +
                      std::to_string(sdk::numel(x)) + " (or their dtypes differ)");
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(batchnorm_add) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] {
    check(call);
    *workspace_bytes = batchnorm_workspace(call);
  });
}

FR_CUDA_KERNEL_RUN(batchnorm_add) {
  return sdk::guard([&] {
    check(call);
    run_batchnorm(ctx, call, call->in[3].data);
  });
}

}  // namespace fresco::cuda
