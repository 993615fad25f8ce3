// XNNPACK forward convolutions with their allocations in the call's workspace (xnn_conv.h).
#include "xnn_conv.h"

#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "fresco/plugin.hpp"

namespace fresco::cpu {

namespace {

// The calling thread's arena: blocks of a 64-byte header (the block's size) and 64-byte aligned data, bumped
// from `base`; with `counting`, blocks come from the heap and `used` only adds up what the arena would take
// (prepare's dry run).
struct Arena {
  char* base = nullptr;
  uint64_t size = 0, used = 0;
  bool counting = false;
};
thread_local Arena* t_arena = nullptr;
std::atomic<uint64_t> g_heap_allocations{0};
std::atomic<uint64_t> g_calls{0};  // allocator calls of any kind (prepare: did XNNPACK use this allocator?)

constexpr uint64_t kAlign = 64;
uint64_t round_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}
uint64_t block_bytes(size_t size) {
  return kAlign + round_up(size);
}
bool in_arena(const Arena* a, const void* p) {
  return a && a->base && p >= a->base && p < a->base + a->size;
}

void* allocate_block(size_t size, size_t alignment) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (alignment > kAlign) return nullptr;  // XNNPACK asks for at most 64 (XNN_ALLOCATION_ALIGNMENT)
  Arena* a = t_arena;
  char* block = nullptr;
  if (a && !a->counting) {
    if (a->used + block_bytes(size) > a->size) return nullptr;  // XNNPACK reports out-of-memory
    block = a->base + a->used;
    a->used += block_bytes(size);
  } else {
    if (a) a->used += block_bytes(size);
    if (!a) g_heap_allocations.fetch_add(1, std::memory_order_relaxed);
    block = static_cast<char*>(std::aligned_alloc(kAlign, block_bytes(size)));
    if (!block) return nullptr;
  }
  *reinterpret_cast<uint64_t*>(block) = size;
  return block + kAlign;
}

void deallocate_block(void* p) {
  if (!p || in_arena(t_arena, p)) return;  // arena blocks go with the call
  std::free(static_cast<char*>(p) - kAlign);
}

void* xnn_allocate(void*, size_t size) {
  return allocate_block(size, kAlign);
}
void* xnn_aligned_allocate(void*, size_t alignment, size_t size) {
  return allocate_block(size, alignment);
}
void xnn_deallocate(void*, void* p) {
  deallocate_block(p);
}
void* xnn_reallocate(void*, void* p, size_t size) {
  void* q = allocate_block(size, kAlign);
  if (q && p) {
    const uint64_t old = *reinterpret_cast<const uint64_t*>(static_cast<char*>(p) - kAlign);
    std::memcpy(q, p, std::min<uint64_t>(old, size));
    deallocate_block(p);
  }
  return q;
}

const xnn_allocator kAllocator = {nullptr,        xnn_allocate,         xnn_reallocate,
                                  xnn_deallocate, xnn_aligned_allocate, xnn_deallocate};

// XNNPACK initialised with this allocator (once per process), and the shared thread pool.
bool xnn_ready() {
  static const bool ok = xnn_initialize(&kAllocator) == xnn_status_success;
  return ok;
}
std::mutex g_pool_mutex;
pthreadpool_t g_pool = nullptr;
pthreadpool_t pool_for(int threads) {  // created at the first prepare (it starts threads), then shared
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = pthreadpool_create(static_cast<size_t>(std::max(threads, 1)));
  return g_pool;
}
pthreadpool_t shared_pool() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  return g_pool;
}

// Images per operator: XNNPACK's indirection buffer holds a pointer per output position and tap (2.4 MB
// for 32 CIFAR images of a 3x3 stem), so a call runs one operator per block of this many images and the arena
// holds one block's.
constexpr int64_t kChunkImages = 32;

// Sets the calling thread's arena for a scope.
struct ArenaScope {
  Arena arena;
  Arena* saved;
  explicit ArenaScope(Arena a) : arena(a), saved(t_arena) { t_arena = &arena; }
  ~ArenaScope() { t_arena = saved; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;
};

// Create, set up and run one operator over the current arena; false (and no output) on any XNNPACK error.
bool run_once(const sdk::ConvShape& g, const float* x, const float* w, const float* b, float* y,
              pthreadpool_t pool) {
  xnn_operator_t op = nullptr;
  const float inf = std::numeric_limits<float>::infinity();
  bool ok = xnn_create_convolution2d_nhwc_f32(
                static_cast<uint32_t>(g.ph), static_cast<uint32_t>(g.pw), static_cast<uint32_t>(g.ph),
                static_cast<uint32_t>(g.pw), static_cast<uint32_t>(g.r), static_cast<uint32_t>(g.s),
                static_cast<uint32_t>(g.sh), static_cast<uint32_t>(g.sw), static_cast<uint32_t>(g.dh),
                static_cast<uint32_t>(g.dw), static_cast<uint32_t>(g.g), static_cast<size_t>(g.cg),
                static_cast<size_t>(g.kg), static_cast<size_t>(g.c), static_cast<size_t>(g.k), w, b, -inf,
                inf, 0, &op) == xnn_status_success;
  ok = ok && xnn_setup_convolution2d_nhwc_f32(op, static_cast<size_t>(g.n), static_cast<size_t>(g.h),
                                              static_cast<size_t>(g.w), x, y, pool) == xnn_status_success;
  ok = ok && xnn_run_operator(op, pool) == xnn_status_success;
  if (op) xnn_delete_operator(op);
  return ok;
}

bool env_off() {
  const char* v = std::getenv("FRESCO_CPU_XNNPACK");
  return v && std::string(v) == "0";
}

}  // namespace

bool xnn_conv_wanted(const sdk::ConvShape& g) {
  // sdk::conv_shape's geometry (symmetric padding, n >= 1, p and q from it) is XNNPACK's: no shape to refuse
  return g.r * g.s * g.cg <= 32 && !env_off();
}

uint64_t xnn_conv_arena_bytes(const sdk::ConvShape& g, bool bias, int threads) {
  if (!xnn_ready()) return 0;
  pthreadpool_t pool = pool_for(threads);
  // a dry run on zeros of one full block's sizes (a later call of this node may hold more images than this
  // one): the blocks XNNPACK takes, counted
  sdk::ConvShape one = g;
  one.n = kChunkImages;
  std::vector<float> x(static_cast<size_t>(one.n * g.h * g.w * g.c)),
      w(static_cast<size_t>(g.k * g.r * g.s * g.cg)), b(bias ? static_cast<size_t>(g.k) : 0),
      y(static_cast<size_t>(one.n * g.p * g.q * g.k));
  Arena count;
  count.counting = true;
  const uint64_t calls = g_calls.load();
  ArenaScope scope(count);
  if (!run_once(one, x.data(), w.data(), bias ? b.data() : nullptr, y.data(), pool)) return 0;
  if (g_calls.load() == calls) return 0;  // XNNPACK was initialised with another allocator: not ours to use
  return round_up(scope.arena.used) + kAlign;
}

void xnn_conv_forward(const sdk::ConvShape& g, const float* x, const float* w, const float* b, float* y,
                      void* arena, uint64_t arena_bytes) {
  FR_PLUGIN_CHECK(arena && reinterpret_cast<uintptr_t>(arena) % kAlign == 0 && arena_bytes > 0,
                  FR_ERR_INVALID_ARGUMENT,
                  "cpu conv2d: XNNPACK's arena must be a 64-byte aligned workspace part");
  pthreadpool_t pool = shared_pool();
  for (int64_t n0 = 0; n0 < g.n; n0 += kChunkImages) {
    sdk::ConvShape part = g;
    part.n = std::min(kChunkImages, g.n - n0);
    Arena a;  // every block of the previous operator went with it
    a.base = static_cast<char*>(arena), a.size = arena_bytes;
    ArenaScope scope(a);
    FR_PLUGIN_CHECK(run_once(part, x + n0 * g.h * g.w * g.c, w, b, y + n0 * g.p * g.q * g.k, pool),
                    FR_ERR_INTERNAL,
                    "cpu conv2d: XNNPACK refused a convolution it took at prepare (or its arena of " +
                        std::to_string(arena_bytes) + " bytes was too small)");
  }
}

uint64_t xnn_conv_heap_allocations() {
  return g_heap_allocations.load();
}

}  // namespace fresco::cpu
