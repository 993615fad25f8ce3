// fresco's own strict-fp32 GEMM (FFMA, no tensor cores, no TF32), offered beside cuBLASLt's configurations
// when ops/matmul_plan.cu times the candidates for an fc problem. Row-major C[m,n] = op(A) op(B) (+ bias[n])
// (relu), with the layouts of matmul_plan.h. Tiles of 128 or 64 rows and columns, 16 x 8 outputs per thread,
// k sliced between 1-8 thread groups of a block, double-buffered shared memory; split-K writes its partial
// products to the workspace and one pass adds them in split order, so every output is summed in a fixed
// order: bit-reproducible for a given configuration, whatever the GPU does. Test: tests/plugins/cuda/ops/
// test_sgemm.cpp (every configuration and layout vs a double reference on the host).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace fresco::cuda {

struct SgemmProblem {
  bool trans_a = false, trans_b = false;  // A stored [k,m] / B stored [n,k] when set (matmul_plan.h)
  int64_t m = 0, n = 0, k = 0;
  bool bias = false, relu = false;
};

// One configuration: a block shape with its k slices (index into the kernel table) and a split-K count over
// blocks. tile < 0: none.
struct SgemmConfig {
  int tile = -1;
  int splits = 1;
};

// Whether the kernels take the problem: every dimension in 1..2^31-1 and m at most 65535 * 64 (the grid's
// y limit), n, k and (for a transposed A) m multiples of 4 (16-byte loads and stores). Pointers must be
// 16-byte aligned (checked by sgemm_run).
bool sgemm_fits(const SgemmProblem& p);
// The configurations worth timing for the problem (empty when it does not fit): each tile shape without
// split-K and, for a grid of fewer blocks than `sm_count` multiprocessors, with each split count (2, 3, 4, 6,
// 8) whose grid stays within two blocks per multiprocessor and whose every split, the last included, keeps at
// least 32 values of k. None needs more than max_workspace.
std::vector<SgemmConfig> sgemm_configs(const SgemmProblem& p, int sm_count, uint64_t max_workspace);
// Workspace bytes a configuration needs (split-K partials), 0 without split-K.
uint64_t sgemm_workspace(const SgemmProblem& p, SgemmConfig c);
// Number of block shapes (SgemmConfig::tile is 0 .. sgemm_tile_count() - 1).
int sgemm_tile_count();
// "128x64k4/s2" (block tile, k slices, split-K) and the like, for logs.
std::string sgemm_name(SgemmConfig c);
// Enqueues the product on s. Throws sdk::KernelError on a configuration, pointer or workspace it cannot use.
void sgemm_run(const SgemmProblem& p, SgemmConfig c, const float* a, const float* b, float* c_out,
               const float* bias, void* workspace, uint64_t workspace_bytes, cudaStream_t s);

}  // namespace fresco::cuda
