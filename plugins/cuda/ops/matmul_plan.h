// A cuBLASLt matmul chosen once, before capture: row-major C[m,n] = op(A) op(B) (+ bias) in strict fp32 (no
// TF32), expressed as the column-major product C^T = op(B)^T op(A)^T. The heuristic's first algorithm is
// kept; cuBLAS is bit-reproducible for a given algorithm, GPU architecture and SM count.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  uint64_t workspace = 0;
  bool bias = false;
};

// Row-major C[m,n] = op(A)[m,k] op(B)[k,n]; A is stored [m,k] (or [k,m] when trans_a), B [k,n] (or [n,k] when
// trans_b), all densely packed. bias (per column of C, length n) when `bias`.
void plan_matmul(Context* ctx, MatmulPlan& p, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 bool bias, uint64_t max_workspace);
void run_matmul(Context* ctx, const MatmulPlan& p, const float* a, const float* b, float* c,
                const float* bias, void* workspace, uint64_t workspace_bytes, cudaStream_t s);
void destroy_matmul(MatmulPlan& p);

// db[n] = sum over rows of dy[m,n], one thread per column in fixed row order (deterministic).
void column_sums(const float* dy, float* db, int64_t m, int64_t n, cudaStream_t s);

}  // namespace fresco::cuda
