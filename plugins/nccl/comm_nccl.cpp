// The "nccl" collective backend (comm_nccl.h).
#include "comm_nccl.h"

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <thread>

#include "fresco/plugin.hpp"

namespace fresco::nccl {

void wait_ready(const NcclRank& r, const char* what) {
  ncclResult_t state = ncclInProgress;
  while (true) {
    FR_PLUGIN_CHECK(!r.group->aborted, FR_ERR_COMM,
                    std::string(what) + ": the group was aborted (another rank failed)");
    const ncclResult_t q = ncclCommGetAsyncError(r.comm, &state);
    FR_PLUGIN_CHECK(q == ncclSuccess, FR_ERR_COMM,
                    std::string(what) + ": ncclCommGetAsyncError: " + ncclGetErrorString(q));
    if (state != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  FR_PLUGIN_CHECK(state == ncclSuccess, FR_ERR_COMM,
                  std::string(what) + " (rank " + std::to_string(r.rank) + "): " + ncclGetErrorString(state));
}

namespace {
FrError* group_create(int32_t world, void** group) noexcept {
  return sdk::guard([&] {
    FR_PLUGIN_CHECK(group && world >= 1 && world <= 4096, FR_ERR_INVALID_ARGUMENT,
                    "nccl: a group of " + std::to_string(world) + " ranks (1 to 4096)");
    auto g = std::make_unique<NcclGroup>();
    g->world = world;
    const ncclResult_t r = ncclGetUniqueId(&g->id);
    FR_PLUGIN_CHECK(r == ncclSuccess, FR_ERR_COMM,
                    std::string("nccl: ncclGetUniqueId: ") + ncclGetErrorString(r));
    *group = g.release();
  });
}

void group_destroy(void* group) noexcept {
  delete static_cast<NcclGroup*>(group);
}

FrError* comm_create(void* group, int32_t rank, void*, int32_t device_index, void** comm) noexcept {
  return sdk::guard([&] {
    auto* g = static_cast<NcclGroup*>(group);
    FR_PLUGIN_CHECK(g && comm && rank >= 0 && rank < g->world, FR_ERR_INVALID_ARGUMENT,
                    "nccl: rank " + std::to_string(rank) + " outside the group");
    FR_PLUGIN_CHECK(!g->aborted, FR_ERR_COMM, "nccl: the group was aborted (another rank failed)");
    const cudaError_t e = cudaSetDevice(device_index);
    FR_PLUGIN_CHECK(e == cudaSuccess, FR_ERR_DEVICE,
                    "nccl: device " + std::to_string(device_index) + ": " + cudaGetErrorString(e));
    auto r = std::make_unique<NcclRank>();
    r->group = g;
    r->rank = rank;
    r->device = device_index;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // group_abort can release a rank waiting here for one that failed
    const ncclResult_t q = ncclCommInitRankConfig(&r->comm, g->world, g->id, rank, &config);
    FR_PLUGIN_CHECK(
        q == ncclSuccess || q == ncclInProgress, FR_ERR_COMM,
        "nccl: ncclCommInitRankConfig (rank " + std::to_string(rank) + "): " + ncclGetErrorString(q));
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(g->mu);
      g->comms.push_back(r->comm);
      aborted = g->aborted;  // the abort ran its loop before this push: abort this one here
    }
    if (aborted) {
      ncclCommAbort(r->comm);
      FR_PLUGIN_CHECK(false, FR_ERR_COMM, "nccl: the group was aborted (another rank failed)");
    }
    wait_ready(*r, "nccl: making the communicator");
    *comm = r.release();
  });
}

void comm_destroy(void* comm) noexcept {
  auto* r = static_cast<NcclRank*>(comm);
  if (!r) return;
  if (!r->group->aborted) {  // an aborted group's communicators were freed by ncclCommAbort
    cudaSetDevice(r->device);
    if (ncclCommFinalize(r->comm) == ncclSuccess) {
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(r->comm, &state) == ncclSuccess && state == ncclInProgress)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    ncclCommDestroy(r->comm);
  }
  delete r;
}

// Known limit (not run on GPUs yet): ncclCommAbort frees a communicator that another rank's thread may be
// inside (an enqueue, a poll) at that moment; NCCL documents the abort from another thread as the way to
// release a hung collective, and every use here checks `aborted` first, which narrows the window but does
// not close it.
void group_abort(void* group) noexcept {
  auto* g = static_cast<NcclGroup*>(group);
  if (!g) return;
  std::lock_guard<std::mutex> lock(g->mu);
  if (g->aborted.exchange(true)) return;
  for (ncclComm_t c : g->comms) ncclCommAbort(c);
}
}  // namespace

const FrCommApi kNcclComm = {sizeof(FrCommApi), 0,           "nccl",       "cuda",      group_create,
                             group_destroy,     comm_create, comm_destroy, group_abort, nullptr};

}  // namespace fresco::nccl
