// CPU device API: the arena and staging buffers are 4 KiB-aligned host memory (zero-filled); streams do not
// exist (kernels run synchronously in launch order); no native capture, so the host replays resolved call
// lists.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "cpu_common.h"

namespace fresco::cpu {

namespace {
constexpr uint64_t kAlign = 4096;

int32_t device_count() {
  return 1;
}

FrError* context_create(int32_t index, void** ctx) {
  return sdk::guard([&] {
    FR_PLUGIN_CHECK(index == 0, FR_ERR_INVALID_ARGUMENT, "cpu: only device 0 exists");
    *ctx = nullptr;
  });
}
void context_destroy(void*) {}

FrError* aligned_zeroed(uint64_t bytes, void** ptr) {
  return sdk::guard([&] {
    FR_PLUGIN_CHECK(bytes <= UINT64_MAX - kAlign, FR_ERR_OUT_OF_MEMORY,
                    "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    const uint64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded ? rounded : kAlign);
    FR_PLUGIN_CHECK(p, FR_ERR_OUT_OF_MEMORY, "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, rounded);
    *ptr = p;
  });
}

FrError* arena_alloc(void*, uint64_t bytes, void** ptr) {
  return aligned_zeroed(bytes, ptr);
}
void arena_free(void*, void* ptr) {
  std::free(ptr);
}
FrError* host_alloc(void*, uint64_t bytes, void** ptr) {
  return aligned_zeroed(bytes, ptr);
}
void host_free(void*, void* ptr) {
  std::free(ptr);
}
FrError* stream_create(void*, void** stream) {
  *stream = nullptr;
  return nullptr;
}
void stream_destroy(void*, void*) {}
FrError* stream_sync(void*, void*) {
  return nullptr;
}
FrError* memcpy_async(void*, void* dst, const void* src, uint64_t bytes, int32_t, void*) {
  return sdk::guard([&] {
    FR_PLUGIN_CHECK(bytes == 0 || (dst && src), FR_ERR_INVALID_ARGUMENT, "cpu memcpy: null pointer");
    std::memmove(dst, src, bytes);
  });
}
}  // namespace

extern const FrDeviceApi kCpuDevice = {
    .struct_size = sizeof(FrDeviceApi),
    .pad_ = 0,
    .name = "cpu",
    .device_count = device_count,
    .context_create = context_create,
    .context_destroy = context_destroy,
    .arena_alloc = arena_alloc,
    .arena_free = arena_free,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .stream_sync = stream_sync,
    .memcpy_async = memcpy_async,
    .capture_begin = nullptr,  // no native capture: the host replays the resolved call list
    .capture_end = nullptr,
    .graph_launch = nullptr,
    .graph_destroy = nullptr,
    .event_create = nullptr,  // kernels run synchronously: no events needed
    .event_destroy = nullptr,
    .event_record = nullptr,
    .stream_wait_event = nullptr,
    .event_sync = nullptr,
    .memory_in_use = nullptr,
    .ext = nullptr};

}  // namespace fresco::cpu
