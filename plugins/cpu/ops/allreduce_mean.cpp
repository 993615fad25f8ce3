// CPU range op allreduce_mean (ops.h) over the "threads" group (comm_threads.h): every rank publishes its
// range; rank r reduces chunk r (an equal share of the values) of all ranks' ranges in rank order, times
// 1 / world, into its own range; after a barrier it copies every other chunk from the rank that reduced
// it; a last barrier keeps the ranges unchanged until every rank has copied. It waits on other threads, so
// it runs outside the backend's thread arena (plugin.cpp), whose slots it would otherwise hold while
// another rank's kernels wait for one. Test: tests/plugins/cpu/test_comm_threads.cpp.
#include <cstring>

#include "comm_threads.h"
#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(allreduce_mean) {
  return sdk::guard([&] {
    const auto [x, comm] = sdk::collective_f32_range(call, "allreduce_mean");
    const auto* c = static_cast<const ThreadComm*>(comm);
    ThreadGroup& g = *c->group;
    const int32_t world = g.world, rank = c->rank;
    const auto r = static_cast<size_t>(rank);
    g.data[r] = static_cast<float*>(x.data);
    g.bytes[r] = x.bytes;
    FR_PLUGIN_CHECK(g.barrier(), FR_ERR_COMM, "allreduce_mean: the group was aborted (another rank failed)");
    // Every rank sees the same sizes, so all refuse alike, after a barrier: none may publish its next
    // collective's range while another still reads this one's.
    int32_t differs = -1;
    for (int32_t q = 0; q < world && differs < 0; ++q)
      if (g.bytes[static_cast<size_t>(q)] != x.bytes) differs = q;
    if (differs >= 0) {
      const uint64_t theirs = g.bytes[static_cast<size_t>(differs)];
      FR_PLUGIN_CHECK(g.barrier(), FR_ERR_COMM,
                      "allreduce_mean: the group was aborted (another rank failed)");
      FR_PLUGIN_CHECK(false, FR_ERR_INVALID_ARGUMENT,
                      "allreduce_mean: rank " + std::to_string(differs) + " reduces " +
                          std::to_string(theirs) + " bytes, rank " + std::to_string(rank) + " " +
                          std::to_string(x.bytes));
    }
    const int64_t n = static_cast<int64_t>(x.bytes / sizeof(float));
    auto chunk_begin = [&](int32_t q) { return n * q / world; };
    const float inv = 1.0f / static_cast<float>(world);
    float* mine = g.data[r];
    for (int64_t i = chunk_begin(rank); i < chunk_begin(rank + 1); ++i) {
      float s = g.data[0][i];
      for (int32_t q = 1; q < world; ++q) s += g.data[static_cast<size_t>(q)][i];
      mine[i] = s * inv;
    }
    FR_PLUGIN_CHECK(g.barrier(), FR_ERR_COMM, "allreduce_mean: the group was aborted (another rank failed)");
    for (int32_t q = 0; q < world; ++q)
      if (q != rank)
        std::memcpy(mine + chunk_begin(q), g.data[static_cast<size_t>(q)] + chunk_begin(q),
                    static_cast<size_t>(chunk_begin(q + 1) - chunk_begin(q)) * sizeof(float));
    FR_PLUGIN_CHECK(g.barrier(), FR_ERR_COMM, "allreduce_mean: the group was aborted (another rank failed)");
  });
}

}  // namespace fresco::cpu
