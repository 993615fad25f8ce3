// The "threads" collective backend (comm_threads.h).
#include "comm_threads.h"

#include "fresco/plugin.hpp"

namespace fresco::cpu {

namespace {
FrError* group_create(int32_t world, void** group) noexcept {
  return sdk::guard([&] {
    FR_PLUGIN_CHECK(group && world >= 1 && world <= 4096, FR_ERR_INVALID_ARGUMENT,
                    "threads: a group of " + std::to_string(world) + " ranks (1 to 4096)");
    *group = new ThreadGroup(world);
  });
}
void group_destroy(void* group) noexcept {
  delete static_cast<ThreadGroup*>(group);
}
FrError* comm_create(void* group, int32_t rank, void*, int32_t, void** comm) noexcept {
  return sdk::guard([&] {
    auto* g = static_cast<ThreadGroup*>(group);
    FR_PLUGIN_CHECK(g && comm && rank >= 0 && rank < g->world, FR_ERR_INVALID_ARGUMENT,
                    "threads: rank " + std::to_string(rank) + " outside the group");
    *comm = new ThreadComm{g, rank};
  });
}
void comm_destroy(void* comm) noexcept {
  delete static_cast<ThreadComm*>(comm);
}
void group_abort(void* group) noexcept {
  if (group) static_cast<ThreadGroup*>(group)->ranks.abort();
}
}  // namespace

const FrCommApi kThreadsComm = {sizeof(FrCommApi), 0,           "threads",    "cpu",       group_create,
                                group_destroy,     comm_create, comm_destroy, group_abort, nullptr};

}  // namespace fresco::cpu
