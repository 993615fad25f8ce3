// Test plugin: exports fresco_plugin_abi but not fresco_plugin_init.
#include "fresco/plugin.h"

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-missing-init", "0"};
}
