// Test plugin: provides a "relu" kernel for device "cpu", which the CPU backend already provides.
#include "fresco/plugin.h"

namespace {
FrError* run(void*, const FrCall*) {
  return nullptr;
}
const FrKernelDef kKernels[] = {
    {sizeof(FrKernelDef), FR_COMPUTE, "relu", "cpu", 1u << FR_F32, 0, nullptr, run, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-duplicate", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = kKernels;
  out->n_kernels = 1;
  return nullptr;
}
