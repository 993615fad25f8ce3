// The CPU backend's own oneTBB arena, in which every kernel runs (plugin.cpp wraps each run function). oneTBB
// gives a task the floating-point settings captured when its arena was initialised, so the arena is
// initialised with flush-to-zero / denormals-are-zero set: kernels never crawl through denormal arithmetic
// (after an epoch, Adam's moments of idle weights decay into denormals and made steps 2-3x slower). The
// calling thread's own mode is restored at once, and the default arena is initialised first, in the caller's
// mode, so the application's own oneTBB work keeps IEEE denormals. Test:
// tests/plugins/cpu/test_cpu_arena.cpp.
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <xmmintrin.h>

#include "cpu_common.h"

namespace fresco::cpu {

tbb::task_arena& cpu_arena() {
  static tbb::task_arena* arena = [] {
    tbb::parallel_for(0, 1, [](int) {});  // the default arena captures the caller's settings first
    auto* a = new tbb::task_arena();      // default concurrency; never destroyed (plugins stay loaded)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | kFlushDenormals);
    a->initialize();
    _mm_setcsr(saved);
    return a;
  }();
  return *arena;
}

}  // namespace fresco::cpu
