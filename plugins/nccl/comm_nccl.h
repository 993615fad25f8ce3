// The "nccl" collective backend (plugin.h FrCommApi) for the cuda device: a group holds one NCCL unique id;
// each rank's communicator is made on that rank's thread (ncclCommInitRankConfig, non-blocking, so a rank
// waiting for another can be released by group_abort instead of waiting for ever) on the rank's device.
// Written without a multi-GPU machine and not yet run (docs/decisions.md, "Several devices"). Test:
// tests/plugins/cuda/test_cuda_data_parallel.cpp (skipped below two GPUs).
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "fresco/plugin.h"

namespace fresco::nccl {

struct NcclGroup {
  int32_t world = 0;
  ncclUniqueId id{};
  std::mutex mu;
  std::vector<ncclComm_t> comms;  // made so far: what group_abort aborts
  std::atomic<bool> aborted{false};
};

struct NcclRank {
  NcclGroup* group = nullptr;
  int32_t rank = 0, device = 0;
  ncclComm_t comm = nullptr;
};

// Waits until the non-blocking communicator has finished what it was asked (ncclInProgress no longer);
// throws FR_ERR_COMM when the group was aborted meanwhile or NCCL reports an error.
void wait_ready(const NcclRank& r, const char* what);

extern const FrCommApi kNcclComm;

}  // namespace fresco::nccl
