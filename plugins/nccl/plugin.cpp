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
  if (!host || host->struct_size < sizeof(FrHostApi) || !out)
    return nullptr == host ? nullptr : host->error_new(FR_ERR_INVALID_ARGUMENT, "nccl: bad host table");
  fresco::sdk::host() = host;
  return fresco::sdk::guard([&] {
    FR_PLUGIN_CHECK(host->abi_major == FR_ABI_MAJOR && host->abi_minor >= 1, FR_ERR_UNSUPPORTED,
                    "nccl plugin: needs a host of ABI 1.1 or later (collective backends)");
    FR_PLUGIN_CHECK(out->struct_size >= sizeof(FrPlugin), FR_ERR_INVALID_ARGUMENT,
                    "nccl plugin: FrPlugin too small");
    out->device = nullptr;
    out->comm = &fresco::nccl::kNcclComm;
    out->kernels = fresco::nccl::kKernels;
    out->n_kernels = 1;
    out->schemas = nullptr;
    out->n_schemas = 0;
    out->ext = nullptr;
  });
}
