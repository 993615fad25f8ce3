// CUDA batchnorm_fold: batchnorm's folded inference form (ops.h), one thread per channel with the shared rule
// of fresco/batchnorm_rules.h (the same formula as the CPU kernel; nvcc may fuse the shift into an fma); run
// once per evaluation pass (UPDATE_BN_INF_PARAMS). channel_affine.cu applies it. Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include "cuda_common.h"
#include "fresco/batchnorm_fold_checks.hpp"
#include "fresco/batchnorm_rules.h"

namespace fresco::cuda {

namespace {
__global__ void fold_kernel(const float* g, const float* b, const float* rm, const float* rv, float* scale,
                            float* shift, int64_t c, float eps) {
  FR_CUDA_GRID_LOOP(i, c) fr_bn_fold(g[i], b[i], rm[i], rv[i], eps, scale + i, shift + i);
}
}  // namespace

FR_CUDA_KERNEL_RUN(batchnorm_fold) {
  return sdk::guard([&] {
    const int64_t c = sdk::batchnorm_fold_channels(call);
    fold_kernel<<<grid_for(c, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]), sdk::data<float>(call->in[2]),
        sdk::data<float>(call->in[3]), sdk::data<float>(call->out[0]), sdk::data<float>(call->out[1]), c,
        sdk::params<FrBatchNormParams>(call).eps);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
