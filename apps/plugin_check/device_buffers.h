// Buffers on a plugin's device for fresco-plugin-check: one-time allocations through the device API, host <->
// device copies, a stream; everything freed at destruction. Device memory is host memory on the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fresco/plugin.h"

namespace fresco::check {

class DeviceBuffers {
 public:
  explicit DeviceBuffers(const FrDeviceApi* api);  // throws fresco::Error when the device cannot be opened
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  void* ctx() const noexcept { return ctx_; }
  void* stream() const noexcept { return stream_; }
  void* alloc(uint64_t bytes);  // zero-filled
  void upload(void* dst, const std::vector<uint8_t>& src);
  std::vector<uint8_t> download(const void* src, uint64_t bytes);
  void sync();

 private:
  const FrDeviceApi* api_;
  void* ctx_ = nullptr;
  void* stream_ = nullptr;
  std::vector<void*> allocs_;
};

}  // namespace fresco::check
