// A matmul planned once, before capture: row-major C[m,n] = op(A) op(B) (+ bias) (+ relu) in strict fp32 (no
// TF32), on cuBLASLt as the column-major product C^T = op(B)^T op(A)^T, or on fresco's own kernel
// (ops/sgemm.h). At prepare time the heuristic's 16 candidates, every other configuration cuBLASLt accepts
// (tiles, split-K; ops/matmul_search.h) and the own kernel's configurations are timed on scratch buffers and
// the fastest is kept and recorded in the tuning cache (tuning/tuning_cache.h), from which later runs on the
// machine take the same choice without timing; one choice per shape per context. Both are bit-reproducible
// for a given configuration (cuBLAS for a given architecture and SM count). FRESCO_CUBLAS_AUTOTUNE=0 keeps
// the heuristic's first choice, 1 times only the heuristic's candidates (and the own kernel's);
// FRESCO_CUDA_SGEMM=0 leaves the own kernel out, 2 takes only its configurations; FRESCO_CUBLAS_LOG=1 prints
// each choice.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  uint64_t workspace = 0;
  bool bias = false;
  bool bias_grad = false;  // cuBLASLt also writes the sums over k of op(A)'s rows (BGRADB), through `bias`
  SgemmProblem problem;    // the same product for the own kernel
  SgemmConfig own;         // tile >= 0: the own kernel runs it, not cuBLASLt
};

// Row-major C[m,n] = op(A)[m,k] op(B)[k,n]; A is stored [m,k] (or [k,m] when trans_a), B [k,n] (or [n,k] when
// trans_b), all densely packed. bias (per column of C, length n) when `bias`; relu applied last when `relu`.
// With `bias_grad` (not with bias or relu) the same call also writes bias[i] = sum over l of op(A)[i,l]
// (length m: an fc weight gradient dy^T x gives its bias gradient), in cuBLASLt's order; throws
// FR_ERR_UNSUPPORTED when cuBLASLt has no such configuration, when the chosen one did not run at prepare, or
// with FRESCO_CUDA_SGEMM=2 (the own kernel has none), and the caller then sums separately.
void plan_matmul(Context* ctx, MatmulPlan& p, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 bool bias, bool relu, uint64_t max_workspace, bool bias_grad = false);
// `bias` is read (bias) or written (bias_grad: cuBLASLt writes through the pointer it is given).
void run_matmul(Context* ctx, const MatmulPlan& p, const float* a, const float* b, float* c,
                const float* bias, void* workspace, uint64_t workspace_bytes, cudaStream_t s);
void destroy_matmul(MatmulPlan& p);

// When y is given, dy[r,j] = 0 where y[r,j] <= 0 (in place, one element-wise pass); when db is given, db[j] =
// sum over rows of the (masked) dy in a fixed order (deterministic; ops/column_sums.cu). Either may be null.
void mask_and_column_sums(float* dy, const float* y, float* db, int64_t m, int64_t n, cudaStream_t s);

}  // namespace fresco::cuda
