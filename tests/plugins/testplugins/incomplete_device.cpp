// Test plugin: a device API with only its size and name set; the loader must refuse it rather than let a
// Runtime call its null functions.
#include "fresco/plugin.h"

namespace {
const FrDeviceApi kDevice = {.struct_size = sizeof(FrDeviceApi), .pad_ = 0, .name = "incomplete"};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-incomplete-device", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->device = &kDevice;
  return nullptr;
}
