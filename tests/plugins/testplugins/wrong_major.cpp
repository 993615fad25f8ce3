// Test plugin: reports ABI major 99, so the loader must refuse it before calling init.
#include "fresco/plugin.h"

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), 99, 0, "test-wrong-major", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi* host, FrPlugin*) {
  return host->error_new(FR_ERR_INTERNAL, "init must never be called on a wrong-major plugin");
}
