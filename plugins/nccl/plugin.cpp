// libfresco-nccl entry points: the ABI info and init, which hand the host the "nccl" collective backend for
// the cuda device and its kernel (no device API: the cuda plugin's). Test: fresco plugins,
// tests/plugins/cuda/test_cuda_data_parallel.cpp.
#include "fresco/plugin.hpp"
#include "comm_nccl.h"
#include "fresco/ops.h"

namespace fresco::nccl {
FrError* allreduce_mean_run(void*, const FrCall* call) noexcept;
namespace {
const FrKernelDef kKernels[] = {{sizeof(FrKernelDef), FR_RANGE, FR_OP_ALLREDUCE_MEAN, "cuda",
                                 FR_DTYPE_BIT(FR_F32), 0, nullptr, allreduce_mean_run, nullptr}};
}  // namespace
}  // namespace fresco::nccl

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "nccl", "0.1.0"};
}

extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi* host, FrPlugin* out) {
  // no device API (the cuda plugin's); a collective backend needs a host of ABI 1.1 or later
  return fresco::sdk::init_plugin(host, out, "nccl",
                                  {nullptr, &fresco::nccl::kNcclComm, fresco::nccl::kKernels, 1}, 1);
}
