// The training batchnorm forward (without given sums) as one cooperative kernel, where the three kernels
// of ops/batchnorm.cu (the moments pass, the finalize, the apply pass) cost two launches and a second read
// of the map: persistent blocks add each chunk's partials exactly as the moments pass does and keep the
// chunk's rows in shared memory, a grid barrier, the finalize of channel groups as its kernel does it (the
// same adds in the same order), another barrier, then the apply pass from the kept rows (rows that did not
// fit are read again). The same bits as the three kernels, by construction: the partials, totals, finalize
// and apply are the same device code (channel_sums.cuh, batchnorm_finalize.cuh). Context::bn_resident
// (FRESCO_CUDA_BN_RESIDENT) says where it runs. Test: tests/plugins/cuda/test_cuda_bn_resident.cpp.
#pragma once

#include "cuda_common.h"
#include "ops/batchnorm_finalize.cuh"
#include "ops/channel_sums.cuh"

namespace fresco::cuda {

// One training batchnorm forward's operands: x and y [k.rows, k.c] of dtype (y may alias x), the residual
// r (x's size, or null: batchnorm_add adds it before the relu), the workspace's partials and coefficients
// (channel_workspace_bytes(k)), the per-channel outputs.
struct BnResidentCall {
  uint32_t dtype;
  const void* x;
  const void* r;
  void* y;
  ChannelChunks k;
  double* part;
  float* coef;
  BnOutputs o;
  int relu;
};

// Launches the cooperative kernel on s and returns true where Context::bn_resident allows this call's
// shape (vector kernels fit, and the whole map fits the resident blocks' shared memory, or with 2 at least
// one chunk per block); returns false, launching nothing, otherwise.
bool launch_bn_resident(const Context* ctx, const BnResidentCall& call, cudaStream_t s);

}  // namespace fresco::cuda
