// Test plugin: an ABI 1.0 op library whose FrPlugin.comm (reserved in 1.0) is not NULL. The loader of 1.1
// must load it and ignore the field (it is no collective backend).
#include "fresco/plugin.h"

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, 0, "test-abi10-reserved", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  static const int kGarbage = 42;
  out->comm = &kGarbage;
  return nullptr;
}
