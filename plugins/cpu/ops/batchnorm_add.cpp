// CPU batchnorm_add: a batchnorm computed by the residual join that is its only reader, y = bn(x) + r, then
// the join's relu (params.relu); training only (sdk/include/fresco/ops.h). The batchnorm's own output is
// never stored; a fourth output takes y's even rows and columns (ops.h, the subsampled output). Test:
// test_batchnorm.cpp (against batchnorm, add and relu).
#include <algorithm>
#include "fresco/batchnorm_add_checks.hpp"

#include "ops/batchnorm_forward.h"

namespace fresco::cpu {

FR_CPU_KERNEL_PREPARE(batchnorm_add) {
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    const FrCall c = sdk::without_subsample(call);
    *state = nullptr;
    *workspace_bytes = batchnorm_workspace(&c);
  });
}

FR_CPU_KERNEL_RUN(batchnorm_add) {
  return sdk::guard([&] {
    const FrTensor* y2 = sdk::check_batchnorm_add(call);
    const FrCall c = sdk::without_subsample(call);
    batchnorm_forward(&c, sdk::data<float>(call->in[3]), 4, "batchnorm_add");
    if (!y2) return;
    // the subsampled output (ops.h): y's even rows and columns
    const FrTensor& y = call->out[0];
    const int64_t h = y.dims[1], w = y.dims[2], ch = y.dims[3], p = y2->dims[1], q = y2->dims[2];
    const float* src = sdk::data<const float>(y);
    float* dst = sdk::data<float>(*y2);
    parallel_chunks(y.dims[0] * p, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < q; ++j)
          std::copy_n(src + (((r / p) * h + 2 * (r % p)) * w + 2 * j) * ch, ch, dst + (r * q + j) * ch);
    });
  });
}

}  // namespace fresco::cpu
