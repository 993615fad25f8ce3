// CPU channel_affine: y = x * scale[c] + shift[c] over an NHWC map seen as [rows, C] (max(y, 0) with
// params.relu), the apply step of batchnorm's folded inference form (batchnorm_fold.cpp); rows in parallel, y
// may alias x. Test: test_batchnorm.cpp.
#include "cpu_common.h"
#include "fresco/batchnorm_fold_checks.hpp"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(channel_affine) {
  return sdk::guard([&] {
    const sdk::AffineShape s = sdk::channel_affine_shape(call);
    FR_PLUGIN_CHECK(call->in[0].dtype == FR_F32, FR_ERR_UNSUPPORTED, "cpu channel_affine: f32 only");
    const bool relu = sdk::params<FrChannelAffineParams>(call).relu != 0;
    const float* x = sdk::data<float>(call->in[0]);
    const float *scale = sdk::data<float>(call->in[1]), *shift = sdk::data<float>(call->in[2]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(s.rows, 256, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < s.c; ++c) {
          const float v = x[r * s.c + c] * scale[c] + shift[c];
          y[r * s.c + c] = relu && !(v > 0.0f) ? 0.0f : v;
        }
    });
  });
}

}  // namespace fresco::cpu
