// Test plugin: links libfresco_test_vanishing.so, which the dynamic loader cannot find (no rpath), so dlopen
// fails.
#include "fresco/plugin.h"

extern "C" int fresco_test_vanishing_value();

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR,
                   fresco_test_vanishing_value() ? "test-dep" : "x", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin*) {
  return nullptr;
}
