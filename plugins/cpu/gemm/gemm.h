// Single-precision GEMM for the CPU backend: BLIS-style packed panels, AVX-512 / AVX2 / generic micro-kernels
// chosen once at run time, oneTBB tasks with a static partition over a fixed tile grid.
// Invariants: sgemm never allocates (all scratch comes from the caller's workspace); every C element is
// computed by one task with a fixed k order, so results are bitwise identical for any number of threads.
// Tested by tests/plugins/cpu/test_gemm.cpp (double reference, every kernel, thread counts); timed by
// bench/cpu_gemm.cpp.
#pragma once
#include <cstdint>

namespace fresco::cpu {

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n]; all row-major. op(A) = A^T when trans_a
// (A is then stored k x m with leading dim lda), likewise B. beta == 0 means C is not read (may hold NaN).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
};

// C[m,n] = beta C + op(A) op(B) on dense row-major operands, each leading dimension its stored row length:
// A stored [m,k] ([k,m] when trans_a), B stored [k,n] ([n,k] when trans_b), C [m,n].
inline GemmArgs dense_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                           const float* b, float* c, float beta = 0.0f) {
  GemmArgs g;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = trans_a ? m : k;
  g.b = b, g.ldb = trans_b ? k : n;
  g.beta = beta;
  g.c = c, g.ldc = n;
  return g;
}

// Bytes of scratch sgemm needs for these sizes, for up to `max_threads` concurrent workers
// (pass tbb::this_task_arena::max_concurrency()). Depends only on (m, n, k, max_threads).
uint64_t gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int max_threads);

// Never allocates: all packing goes to `workspace` (64-byte aligned, at least gemm_workspace_bytes bytes;
// throws std::invalid_argument if too small or args inconsistent). Runs in the caller's task arena, whose
// max_concurrency() the workspace must cover; one sgemm at a time may use a given workspace.
void sgemm(const GemmArgs& args, void* workspace, uint64_t workspace_bytes);

// Name of the micro-kernel chosen at run time ("avx512", "avx2", "generic"), for logs and benchmarks.
const char* gemm_kernel_name();

// Every micro-kernel compiled into the library. sgemm uses the best one this CPU supports; tests and
// benchmarks may run another one explicitly (std::invalid_argument if this CPU lacks its instructions).
enum class GemmKernel : int { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };
bool gemm_kernel_supported(GemmKernel kernel);
const char* gemm_kernel_name(GemmKernel kernel);
void sgemm_with_kernel(GemmKernel kernel, const GemmArgs& args, void* workspace, uint64_t workspace_bytes);

namespace detail {
// Internal interface between the driver (gemm.cpp) and one instruction set (gemm_<isa>.cpp).
// Packed layouts are k-major: an A micro-panel is kc rows of `mr` floats (op(A) rows i..i+mr-1 at one k),
// a B micro-panel is kc rows of `nr` floats. Padding lanes of a panel are never used in a stored result.
struct GemmMicroKernel {
  const char* name;
  int mr, nr;
  // Packs op(A)[0:rows, 0:kc] (rows <= mr; `a` points at op(A)[0][0]) into one A micro-panel.
  void (*pack_a)(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* dst);
  // Packs op(B)[0:kc, 0:cols] into ceil(cols / nr) B micro-panels of kc * nr floats each, zero-padded.
  void (*pack_b)(const float* b, int64_t ldb, bool trans, int64_t kc, int64_t cols, float* dst);
  // C[0:rows, 0:cols] = alpha * Apanel * B + (first ? beta * C : C), rows <= mr, cols <= nr. B row p starts
  // at b + p * b_stride (a packed panel: b_stride = nr; an untransposed B used in place: b_stride = ldb);
  // only its first `cols` floats are read. With first && beta == 0, C is not read.
  void (*tile)(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc, int rows,
               int cols, float alpha, float beta, bool first);
};
extern const GemmMicroKernel kGemmGeneric;
extern const GemmMicroKernel kGemmAvx2;
extern const GemmMicroKernel kGemmAvx512;
}  // namespace detail

}  // namespace fresco::cpu
