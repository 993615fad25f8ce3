// CUDA range op allreduce_mean (ops.h) through NCCL (comm_nccl.h): ncclAllReduce with ncclAvg in place on
// the call's stream, so a captured step holds it as a node of its CUDA graph; every rank gets the bits NCCL's
// reduction gives, the same on every rank. Written without a multi-GPU machine and not yet run.
#include <cuda_runtime.h>

#include <string>

#include "comm_nccl.h"
#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::nccl {

FrError* allreduce_mean_run(void*, const FrCall* call) noexcept {
  return sdk::guard([&] {
    const auto [x, comm] = sdk::collective_f32_range(call, "allreduce_mean");
    const auto* r = static_cast<const NcclRank*>(comm);
    FR_PLUGIN_CHECK(!r->group->aborted, FR_ERR_COMM,
                    "allreduce_mean: the group was aborted (another rank failed)");
    const ncclResult_t q = ncclAllReduce(x.data, x.data, x.bytes / sizeof(float), ncclFloat32, ncclAvg,
                                         r->comm, static_cast<cudaStream_t>(call->stream));
    FR_PLUGIN_CHECK(q == ncclSuccess || q == ncclInProgress, FR_ERR_COMM,
                    std::string("allreduce_mean: ncclAllReduce: ") + ncclGetErrorString(q));
    if (q == ncclInProgress) wait_ready(*r, "allreduce_mean");
  });
}

}  // namespace fresco::nccl
