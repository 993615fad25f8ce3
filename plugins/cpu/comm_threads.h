// The CPU backend's collective backend "threads" (plugin.h FrCommApi; DESIGN §10: an in-process comm
// backend, so tests run N ranks without GPUs): the ranks are host threads of one process, meeting at a
// barrier that group_abort opens for good (every wait then fails instead of waiting for a rank that
// stopped). allreduce_mean (ops/allreduce_mean.cpp) publishes each rank's range, reduces its own chunk of
// every rank's values in rank order, and copies the other chunks from their owners. Test:
// tests/plugins/cpu/test_comm_threads.cpp, tests/e2e/test_data_parallel_cpu.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "fresco/plugin.h"
#include "fresco/rank_barrier.hpp"

namespace fresco::cpu {

struct ThreadGroup {
  explicit ThreadGroup(int32_t n)
      : world(n), data(static_cast<size_t>(n)), bytes(static_cast<size_t>(n)), ranks(n) {}
  const int32_t world;
  // what each rank published for the collective under way
  std::vector<float*> data;
  std::vector<uint64_t> bytes;
  sdk::RankBarrier ranks;
  // Waits until every rank has arrived (false: the group was aborted, now or before).
  bool barrier() { return ranks.wait(); }
};

struct ThreadComm {
  ThreadGroup* group;
  int32_t rank;
};

extern const FrCommApi kThreadsComm;

}  // namespace fresco::cpu
