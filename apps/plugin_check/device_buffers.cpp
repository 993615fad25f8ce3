// DeviceBuffers: allocation and copies through a plugin's FrDeviceApi (see device_buffers.h).
#include "device_buffers.h"

#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"

namespace fresco::check {

DeviceBuffers::DeviceBuffers(const FrDeviceApi* api) : api_(api) {
  FRESCO_CHECK(api_->device_count && api_->device_count() > 0, ErrorCode::kBadConfig,
               std::string("device '") + api_->name + "' has no device on this machine");
  throw_if_error(api_->context_create(0, &ctx_), std::string("opening device ") + api_->name);
  if (api_->stream_create) throw_if_error(api_->stream_create(ctx_, &stream_), "creating a stream");
}

DeviceBuffers::~DeviceBuffers() {
  if (api_->stream_sync) (void)api_->stream_sync(ctx_, stream_);
  for (void* p : allocs_) api_->arena_free(ctx_, p);
  if (stream_ && api_->stream_destroy) api_->stream_destroy(ctx_, stream_);
  if (ctx_) api_->context_destroy(ctx_);
}

void* DeviceBuffers::alloc(uint64_t bytes) {
  void* p = nullptr;
  throw_if_error(api_->arena_alloc(ctx_, bytes ? bytes : 256, &p), "allocating device memory");
  allocs_.push_back(p);
  return p;
}

void DeviceBuffers::upload(void* dst, const std::vector<uint8_t>& src) {
  if (!src.empty())
    throw_if_error(api_->memcpy_async(ctx_, dst, src.data(), src.size(), 0, stream_), "upload");
  sync();
}

std::vector<uint8_t> DeviceBuffers::download(const void* src, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  sync();
  if (bytes) throw_if_error(api_->memcpy_async(ctx_, out.data(), src, bytes, 1, stream_), "download");
  sync();
  return out;
}

void DeviceBuffers::sync() {
  if (api_->stream_sync) throw_if_error(api_->stream_sync(ctx_, stream_), "stream synchronize");
}

}  // namespace fresco::check
