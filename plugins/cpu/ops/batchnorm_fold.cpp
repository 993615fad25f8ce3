// CPU batchnorm_fold: batchnorm's folded inference form (ops.h), run once per evaluation pass
// (UPDATE_BN_INF_PARAMS) with the shared rule of fresco/batchnorm_rules.h; channel_affine.cpp applies it.
// Test: test_batchnorm.cpp.
#include "cpu_common.h"
#include "fresco/batchnorm_fold_checks.hpp"
#include "fresco/batchnorm_rules.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(batchnorm_fold) {
  return sdk::guard([&] {
    const int64_t c = sdk::batchnorm_fold_channels(call);
    const float eps = sdk::params<FrBatchNormParams>(call).eps;
    const float *g = sdk::data<float>(call->in[0]), *b = sdk::data<float>(call->in[1]);
    const float *rm = sdk::data<float>(call->in[2]), *rv = sdk::data<float>(call->in[3]);
    float *scale = sdk::data<float>(call->out[0]), *shift = sdk::data<float>(call->out[1]);
    for (int64_t i = 0; i < c; ++i) fr_bn_fold(g[i], b[i], rm[i], rv[i], eps, scale + i, shift + i);
  });
}

}  // namespace fresco::cpu
