// The CPU batchnorm forward shared by batchnorm and batchnorm_add (ops/batchnorm.cpp). Test:
// test_batchnorm.cpp.
#pragma once

#include "cpu_common.h"

namespace fresco::cpu {

// Workspace bytes of a batchnorm call (training or inference, from its params); checks its arity.
uint64_t batchnorm_workspace(const FrCall* call);
// y = bn(x) (+ residual[i] when not null), then the fused relu of params.relu; in training the sums of x
// are in[sums_index] when the call has that input (ops.h); `op` names the op in errors. Throws
// sdk::KernelError.
void batchnorm_forward(const FrCall* call, const float* residual, uint32_t sums_index, const char* op);

}  // namespace fresco::cpu
