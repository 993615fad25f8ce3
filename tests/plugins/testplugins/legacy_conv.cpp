// Test plugin: an f16 conv2d kernel for the "cpu" device written before the sums operands existed (flags 0:
// it declares none). The runtime must refuse a conv2d node with a sums output on it, and accept a plain one.
// Its run is never reached in the test.
#include "fresco/ops.h"
#include "fresco/plugin.h"

namespace {
FrError* run(void*, const FrCall*) {
  return nullptr;
}
const FrKernelDef kKernels[] = {
    {sizeof(FrKernelDef), FR_COMPUTE, FR_OP_CONV2D, "cpu", FR_DTYPE_BIT(FR_F16), 0, nullptr, run, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-legacy-conv", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = kKernels;
  out->n_kernels = 1;
  return nullptr;
}
