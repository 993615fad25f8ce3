// Shared helpers of the CPU backend's kernels: deterministic parallel loops and the kernel-entry macro.
// Invariant: every parallel loop uses a static partition that depends only on the problem size, so results do
// not depend on the thread count (reductions inside a chunk run in a fixed order).
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstdint>

#include "fresco/plugin.hpp"

namespace fresco::cpu {

// Calls fn(begin, end) over [0, n) in chunks of `grain` (the last one shorter), in parallel.
template <class F>
void parallel_chunks(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t chunks = (n + grain - 1) / grain;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t c = r.begin(); c != r.end(); ++c) fn(c * grain, std::min(n, (c + 1) * grain));
      },
      tbb::static_partitioner());
}

// The backend's arena (cpu_arena.cpp): kernels run inside it with denormals flushed to zero.
constexpr unsigned kFlushDenormals = 0x8040u;  // MXCSR: flush to zero (bit 15), denormals are zero (bit 6)
tbb::task_arena& cpu_arena();

inline int max_threads() {
  return cpu_arena().max_concurrency();
}

// Kernel-table trampoline: runs a kernel's run function inside the backend's arena.
template <FrError* (*Run)(void*, const FrCall*) noexcept>
FrError* in_arena(void* ctx, const FrCall* call) noexcept {
  FrError* err = nullptr;
  try {
    cpu_arena().execute([&] { err = Run(ctx, call); });
  } catch (...) {
    err = sdk::make_error(FR_ERR_INTERNAL, "cpu: could not enter the backend's thread arena");
  }
  return err;
}

inline void expect_dtype(const FrTensor& t, FrDType d, const char* what) {
  FR_PLUGIN_CHECK(t.dtype == static_cast<uint32_t>(d), FR_ERR_INVALID_ARGUMENT,
                  std::string(what) + ": unexpected dtype " + std::to_string(t.dtype));
}

}  // namespace fresco::cpu

// Declares the kernel table entry points of one op: <name>_prepare (optional) and <name>_run.
#define FR_CPU_KERNEL_RUN(name) FrError* name##_run(void*, const FrCall* call) noexcept
#define FR_CPU_KERNEL_PREPARE(name) \
  FrError* name##_prepare(void*, const FrCall* call, void** state, uint64_t* workspace_bytes) noexcept
