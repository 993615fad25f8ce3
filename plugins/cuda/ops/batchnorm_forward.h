// The CUDA batchnorm forward shared by batchnorm and batchnorm_add (ops/batchnorm.cu). Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

// Workspace bytes of a batchnorm call (training or inference, from its params); checks its shapes.
uint64_t batchnorm_workspace(const FrCall* call);
// y = bn(x) (+ residual, x's dtype and size, when not null), then the fused relu of params.relu; in training
// the sums of x are in[sums_index] when the call has that input (ops.h); `op` names the op in errors. With y2
// (batchnorm_add's subsampled output, ops.h; call then has three outputs) the apply pass also writes y's even
// rows and columns there. Throws sdk::KernelError.
void run_batchnorm(void* ctx, const FrCall* call, const void* residual, uint32_t sums_index, const char* op,
                   const FrTensor* y2 = nullptr);

}  // namespace fresco::cuda
