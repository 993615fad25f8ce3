// Test plugin: f16 conv2d, conv2d_backward, batchnorm_backward and sgd_update kernels for the "cpu" device
// written before the optional operand forms existed (flags 0: they declare none; the batchnorm_backward came
// after the sums operands, before its weights-only form; the sgd_update before the per-step momentum). The
// runtime must refuse nodes that use a form on them (a conv2d with a sums output, the weight gradient's
// batchnorm prologue, ...), and accept plain ones. Their run is never reached in the tests.
#include "fresco/ops.h"
#include "fresco/plugin.h"

namespace {
FrError* run(void*, const FrCall*) {
  return nullptr;
}
const FrKernelDef kKernels[] = {
    {sizeof(FrKernelDef), FR_COMPUTE, FR_OP_CONV2D, "cpu", FR_DTYPE_BIT(FR_F16), 0, nullptr, run, nullptr},
    {sizeof(FrKernelDef), FR_COMPUTE, FR_OP_CONV2D_BACKWARD, "cpu", FR_DTYPE_BIT(FR_F16), 0, nullptr, run,
     nullptr},
    {sizeof(FrKernelDef), FR_COMPUTE, FR_OP_BATCHNORM_BACKWARD, "cpu", FR_DTYPE_BIT(FR_F16),
     FR_KERNEL_SUMS_OPERANDS, nullptr, run, nullptr},
    {sizeof(FrKernelDef), FR_RANGE, FR_OP_SGD_UPDATE, "cpu", FR_DTYPE_BIT(FR_F16), 0, nullptr, run, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "test-legacy-conv", "0"};
}
extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi*, FrPlugin* out) {
  out->kernels = kKernels;
  out->n_kernels = sizeof(kKernels) / sizeof(kKernels[0]);
  return nullptr;
}
