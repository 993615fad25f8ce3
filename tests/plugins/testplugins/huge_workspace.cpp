// Test plugin: a "cpu" kernel for op "huge_workspace" whose prepare asks for 2^64 - 16 bytes of workspace;
// the runtime must refuse it (rounding that size up wrapped to a tiny allocation that every kernel of the
// stream then wrote past). Its run is never reached in the tests.
#include "fresco/plugin.h"

namespace {
FrError* prepare(void*, const FrCall*, void** state, uint64_t* workspace_bytes) {
  *state = nullptr;
  *workspace_bytes = ~uint64_t{0} - 15;
  return nullptr;
}
FrError* run(void*, const FrCall*) {
  return nullptr;
}
const FrKernelDef kKernels[] = {{sizeof(FrKernelDef), FR_COMPUTE, "huge_workspace", "cpu",
                                 FR_DTYPE_BIT(FR_F32), 0, prepare, run, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-huge-workspace", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = kKernels;
  out->n_kernels = 1;
  return nullptr;
}
