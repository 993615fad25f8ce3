// CPU batchnorm_add: a batchnorm computed by the residual join that is its only reader, y = bn(x) + r, then
// the join's relu (params.relu); training only (sdk/include/fresco/ops.h). The batchnorm's own output is
// never stored. Test: test_batchnorm.cpp (against batchnorm, add and relu).
#include "fresco/batchnorm_add_checks.hpp"
#include "ops/batchnorm_forward.h"

namespace fresco::cpu {

FR_CPU_KERNEL_PREPARE(batchnorm_add) {
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    *state = nullptr;
    *workspace_bytes = batchnorm_workspace(call);
  });
}

FR_CPU_KERNEL_RUN(batchnorm_add) {
  return sdk::guard([&] {
    sdk::check_batchnorm_add(call);
    batchnorm_forward(call, sdk::data<float>(call->in[3]), 4, "batchnorm_add");
  });
}

}  // namespace fresco::cpu
