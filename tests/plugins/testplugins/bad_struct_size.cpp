// Test plugin: its kernel table entry claims a struct_size smaller than FrKernelDef, so loaders and
// fresco-plugin-check must refuse it.
#include "fresco/plugin.h"

namespace {
FrError* run(void*, const FrCall*) {
  return nullptr;
}
const FrKernelDef kKernels[] = {{8, FR_COMPUTE, "relu", "cpu", 1u << FR_F32, 0, nullptr, run, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-bad-struct-size", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = kKernels;
  out->n_kernels = 1;
  return nullptr;
}
