// sgemm driver: argument checks, k blocking, the fixed task grid, workspace carving, scalar packers and the
// oneTBB loop; the micro-kernels live in gemm_<isa>.cpp behind detail::GemmMicroKernel.
// Invariants: never allocates; the k split depends only on k and the task grid only on (m, n, k) and the
// kernel, never on the thread count, and each C tile belongs to one task that walks k in order ->
// bitwise-identical results on any number of threads. Tested by tests/plugins/cpu/test_gemm.cpp.
#include "gemm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fresco::cpu {
namespace {

using detail::GemmMicroKernel;

// Cache blocking (Sapphire Rapids: 48 KiB L1d, 2 MiB L2 per core). A k block of at most kKcMax keeps one A
// micro-panel (mr x kc) in L1 while the task's B block (kc x nc, at most kBBlockBytes) streams from L2.
constexpr int64_t kKcMax = 384;
constexpr int64_t kBBlockBytes = int64_t{1} << 20;
// An untransposed op(B) is read in place, not packed, by a task with at most this many A micro-panels:
// packing it would cost more than the contiguous panels save.
constexpr int64_t kBInPlaceMaxPanels = 16;
// Task grid: at most kMaxTasks tasks; below kParallelFlops the whole product is one task (waking a second
// thread costs more than it saves); splitting stops once re-packing would exceed kSplitOverhead of the work.
constexpr int64_t kMaxTasks = 64;
constexpr double kParallelFlops = 2.0e6;
constexpr double kTaskFlops = 16.0e6;
constexpr double kSplitOverhead = 0.01;
constexpr double kPackCyclesPerFloat = 0.5;
constexpr double kFlopsPerCycle = 64.0;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
uint64_t align64(uint64_t x) {
  return (x + 63) & ~uint64_t{63};
}

const GemmMicroKernel& micro_kernel(GemmKernel kernel) {
  switch (kernel) {
    case GemmKernel::kAvx512:
      return detail::kGemmAvx512;
    case GemmKernel::kAvx2:
      return detail::kGemmAvx2;
    case GemmKernel::kGeneric:
      break;
  }
  return detail::kGemmGeneric;
}

GemmKernel best_kernel() {
  static const GemmKernel best = [] {
    if (gemm_kernel_supported(GemmKernel::kAvx512)) return GemmKernel::kAvx512;
    if (gemm_kernel_supported(GemmKernel::kAvx2)) return GemmKernel::kAvx2;
    return GemmKernel::kGeneric;
  }();
  return best;
}

// How C and k are cut. Depends only on (m, n, k) and the kernel's tile.
struct Blocking {
  int64_t kc = 0, nkb = 0;           // nkb k blocks of kc (the last may be shorter)
  int64_t tiles_m = 0, tiles_n = 0;  // mr x nr tiles of C
  int64_t nc_tiles_max = 0;          // most nr tiles one task may hold (its packed B block fits kBBlockBytes)
  int64_t tm = 1, tn = 1;            // task grid: tm row groups x tn column groups of tiles
  int64_t tasks() const { return tm * tn; }
};

Blocking make_blocking(const GemmMicroKernel& kern, int64_t m, int64_t n, int64_t k) {
  Blocking bl;
  bl.nkb = ceil_div(k, kKcMax);
  bl.kc = ceil_div(k, bl.nkb);
  bl.tiles_m = ceil_div(m, kern.mr);
  bl.tiles_n = ceil_div(n, kern.nr);
  const int64_t b_panel_bytes = bl.kc * kern.nr * static_cast<int64_t>(sizeof(float));
  bl.nc_tiles_max = std::clamp<int64_t>(kBBlockBytes / b_panel_bytes, 1, bl.tiles_n);
  bl.tm = 1;
  bl.tn = ceil_div(bl.tiles_n, bl.nc_tiles_max);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (flops < kParallelFlops && bl.tn == 1) return bl;
  // Splitting the columns once more re-packs op(A) (m x k) tn more times; splitting the rows re-packs op(B).
  const double work_cycles = flops / kFlopsPerCycle;
  const double target = std::clamp(flops / kTaskFlops, 2.0, static_cast<double>(kMaxTasks));
  double extra = 0.0;
  while (static_cast<double>(bl.tasks()) < target || bl.tasks() % 2 != 0) {
    const bool can_n = bl.tn * 2 <= bl.tiles_n, can_m = bl.tm * 2 <= bl.tiles_m;
    const double cost_n = kPackCyclesPerFloat * static_cast<double>(bl.tn * m * k);
    const double cost_m = kPackCyclesPerFloat * static_cast<double>(bl.tm * n * k);
    if (!can_n && !can_m) break;
    const bool split_n = can_n && (!can_m || cost_n <= cost_m);
    const double cost = split_n ? cost_n : cost_m;
    if (bl.tasks() >= 2 && bl.tasks() % 2 == 0 && extra + cost > kSplitOverhead * work_cycles) break;
    extra += cost;
    (split_n ? bl.tn : bl.tm) *= 2;
  }
  return bl;
}

// Scratch of one worker: a packed B block, then one packed A micro-panel.
uint64_t b_block_bytes(const GemmMicroKernel& kern, const Blocking& bl) {
  return align64(static_cast<uint64_t>(bl.kc * bl.nc_tiles_max * kern.nr) * sizeof(float));
}
uint64_t slot_bytes(const GemmMicroKernel& kern, const Blocking& bl) {
  return b_block_bytes(kern, bl) + align64(static_cast<uint64_t>(kern.mr * bl.kc) * sizeof(float));
}

// Worker slots are the same size for every kernel, so a workspace fits whichever kernel runs.
uint64_t slot_stride(int64_t m, int64_t n, int64_t k) {
  uint64_t stride = 0;
  for (const GemmMicroKernel* kern : {&detail::kGemmGeneric, &detail::kGemmAvx2, &detail::kGemmAvx512}) {
    stride = std::max(stride, slot_bytes(*kern, make_blocking(*kern, m, n, k)));
  }
  return stride;
}

// Portable packers (used by kernels that bring none): same layouts as detail::GemmMicroKernel describes.
void pack_a_scalar(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, int mr, float* dst) {
  for (int64_t i = 0; i < mr; ++i) {
    if (i >= rows) {
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = 0.0f;
    } else if (trans) {
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = a[p * lda + i];
    } else {
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + i] = a[i * lda + p];
    }
  }
}

void pack_b_scalar(const float* b, int64_t ldb, bool trans, int64_t kc, int64_t cols, int nr, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += nr, dst += kc * nr) {
    const int64_t w = std::min<int64_t>(nr, cols - j0);
    for (int64_t p = 0; p < kc; ++p) {
      float* d = dst + p * nr;
      for (int64_t j = 0; j < w; ++j) d[j] = trans ? b[(j0 + j) * ldb + p] : b[p * ldb + j0 + j];
      for (int64_t j = w; j < nr; ++j) d[j] = 0.0f;
    }
  }
}

// Computes the C tiles of task `t`: all of k, block by block, for its row group x column group.
void run_task(const GemmMicroKernel& kern, const GemmArgs& g, const Blocking& bl, int64_t t, char* slot) {
  const int64_t mr = kern.mr, nr = kern.nr;
  const int64_t ti = t / bl.tn, tj = t % bl.tn;
  const int64_t r0 = ti * bl.tiles_m / bl.tm * mr, r1 = std::min(g.m, (ti + 1) * bl.tiles_m / bl.tm * mr);
  const int64_t c0 = tj * bl.tiles_n / bl.tn * nr, c1 = std::min(g.n, (tj + 1) * bl.tiles_n / bl.tn * nr);
  float* b_buf = reinterpret_cast<float*>(slot);
  float* a_buf = reinterpret_cast<float*>(slot + b_block_bytes(kern, bl));
  const bool b_in_place = !g.trans_b && r1 - r0 <= kBInPlaceMaxPanels * mr;
  for (int64_t pb = 0; pb < bl.nkb; ++pb) {
    const int64_t p0 = pb * bl.kc, kc = std::min(bl.kc, g.k - p0);
    const float* b_blk = g.trans_b ? g.b + c0 * g.ldb + p0 : g.b + p0 * g.ldb + c0;
    int64_t b_stride = nr, panel_step = kc * nr;
    if (b_in_place) {
      b_stride = g.ldb;
      panel_step = nr;
    } else {
      if (kern.pack_b != nullptr) {
        kern.pack_b(b_blk, g.ldb, g.trans_b, kc, c1 - c0, b_buf);
      } else {
        pack_b_scalar(b_blk, g.ldb, g.trans_b, kc, c1 - c0, kern.nr, b_buf);
      }
      b_blk = b_buf;
    }
    for (int64_t r = r0; r < r1; r += mr) {
      const int64_t rows = std::min(mr, r1 - r);
      const float* a_src = g.trans_a ? g.a + p0 * g.lda + r : g.a + r * g.lda + p0;
      if (kern.pack_a != nullptr) {
        kern.pack_a(a_src, g.lda, g.trans_a, rows, kc, a_buf);
      } else {
        pack_a_scalar(a_src, g.lda, g.trans_a, rows, kc, kern.mr, a_buf);
      }
      float* c_row = g.c + r * g.ldc;
      const float* b_panel = b_blk;
      for (int64_t c = c0; c < c1; c += nr, b_panel += panel_step) {
        kern.tile(kc, a_buf, b_panel, b_stride, c_row + c, g.ldc, static_cast<int>(rows),
                  static_cast<int>(std::min(nr, c1 - c)), g.alpha, g.beta, pb == 0);
      }
    }
  }
}

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("fresco::cpu::sgemm: " + what);
}

std::string dims(int64_t rows, int64_t cols) {
  return std::to_string(rows) + " x " + std::to_string(cols);
}

// One stored operand: `name` is stored rows x cols with leading dimension ld.
void check_operand(const char* name, const void* ptr, int64_t rows, int64_t cols, int64_t ld,
                   const char* ld_name, bool trans) {
  if (rows == 0 || cols == 0) return;
  auto stored = [&] {
    return std::string(name) + " is stored " + dims(rows, cols) + (trans ? " (transposed)" : "");
  };
  if (ptr == nullptr) fail(std::string(name) + " is null but " + stored());
  if (ld < cols) {
    fail(std::string(ld_name) + " = " + std::to_string(ld) + " is less than " + std::to_string(cols) + ": " +
         stored());
  }
}

void check_args(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) {
    fail("negative size m = " + std::to_string(g.m) + ", n = " + std::to_string(g.n) +
         ", k = " + std::to_string(g.k));
  }
  check_operand("A", g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, "lda", g.trans_a);
  check_operand("B", g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, "ldb", g.trans_b);
  check_operand("C", g.c, g.m, g.n, g.ldc, "ldc", false);
}

void check_workspace(const GemmArgs& g, const void* workspace, uint64_t workspace_bytes, int threads) {
  const uint64_t need = gemm_workspace_bytes(g.m, g.n, g.k, threads);
  if (need == 0) return;
  if (workspace == nullptr) fail("workspace is null; this product needs " + std::to_string(need) + " bytes");
  if (reinterpret_cast<uintptr_t>(workspace) % 64 != 0) fail("workspace is not 64-byte aligned");
  if (workspace_bytes < need) {
    fail("workspace has " + std::to_string(workspace_bytes) + " bytes, " + std::to_string(need) +
         " needed for m = " + std::to_string(g.m) + ", n = " + std::to_string(g.n) +
         ", k = " + std::to_string(g.k) + " and " + std::to_string(threads) +
         " threads (gemm_workspace_bytes with tbb::this_task_arena::max_concurrency())");
  }
}

// C = beta * C, not reading C when beta == 0 (k == 0 or alpha == 0).
void scale_c(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    if (g.beta == 0.0f) {
      std::fill(row, row + g.n, 0.0f);
    } else {
      for (int64_t j = 0; j < g.n; ++j) row[j] *= g.beta;
    }
  }
}

void run(const GemmMicroKernel& kern, const GemmArgs& g, void* workspace, uint64_t workspace_bytes) {
  check_args(g);
  const int threads = tbb::this_task_arena::max_concurrency();
  check_workspace(g, workspace, workspace_bytes, threads);
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0 || g.alpha == 0.0f) return scale_c(g);
  const Blocking bl = make_blocking(kern, g.m, g.n, g.k);
  const uint64_t stride = slot_stride(g.m, g.n, g.k);
  char* base = static_cast<char*>(workspace);
  if (bl.tasks() == 1) return run_task(kern, g, bl, 0, base);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, bl.tasks(), 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        const int slot = tbb::this_task_arena::current_thread_index();
        if (slot < 0 || slot >= threads)
          throw std::logic_error("fresco::cpu::sgemm: worker outside the arena");
        for (int64_t t = range.begin(); t != range.end(); ++t) run_task(kern, g, bl, t, base + slot * stride);
      },
      tbb::static_partitioner());
}

}  // namespace

uint64_t gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int max_threads) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  return static_cast<uint64_t>(std::max(max_threads, 1)) * slot_stride(m, n, k);
}

void sgemm(const GemmArgs& args, void* workspace, uint64_t workspace_bytes) {
  run(micro_kernel(best_kernel()), args, workspace, workspace_bytes);
}

const char* gemm_kernel_name() {
  return micro_kernel(best_kernel()).name;
}

bool gemm_kernel_supported(GemmKernel kernel) {
  if (kernel == GemmKernel::kGeneric) return true;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (kernel == GemmKernel::kAvx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  if (kernel == GemmKernel::kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return false;
}

const char* gemm_kernel_name(GemmKernel kernel) {
  return micro_kernel(kernel).name;
}

void sgemm_with_kernel(GemmKernel kernel, const GemmArgs& args, void* workspace, uint64_t workspace_bytes) {
  if (!gemm_kernel_supported(kernel)) {
    fail(std::string("kernel ") + micro_kernel(kernel).name + " needs instructions this CPU lacks");
  }
  run(micro_kernel(kernel), args, workspace, workspace_bytes);
}

}  // namespace fresco::cpu
