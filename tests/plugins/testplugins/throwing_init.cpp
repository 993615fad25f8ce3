// Test plugin: a C++ plugin whose init lets an exception escape; the loader must refuse it with the reason.
#include <stdexcept>

#include "fresco/plugin.h"

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-throwing-init", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin*) {
  throw std::runtime_error("boom in init");
}
