// Test plugin: announces one kernel but hands over no kernel table, so loaders and fresco-plugin-check must
// refuse it.
#include "fresco/plugin.h"

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-missing-kernel", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = nullptr;
  out->n_kernels = 1;
  return nullptr;
}
