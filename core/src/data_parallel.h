// The collective group of a data-parallel job's ranks (DeepLearningTask::ranks): made by the device's
// collective backend (plugin.h FrCommApi), shared by every rank's task, destroyed after their runtimes; and
// the host's own meeting point of the ranks at each epoch's end (their train metrics added up, then rank 0's
// report, evaluation and callback before any rank starts the next epoch).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "fresco/ops.h"
#include "fresco/plugin.h"
#include "fresco/rank_barrier.hpp"

namespace fresco {

// sum += m, field by field: the ranks' train metrics of one epoch added up.
inline void add_metrics(FrMetricAccumulators& sum, const FrMetricAccumulators& m) {
  sum.loss_sum += m.loss_sum;
  sum.correct += m.correct;
  sum.samples += m.samples;
  sum.batches += m.batches;
}

struct CommGroup {
  CommGroup(const FrCommApi* a, int32_t world);
  ~CommGroup();
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;
  // Every rank's collectives and host meetings fail from now on instead of waiting (an error on one rank
  // stops the others); `why` (the first rank's error) is kept for the calls refused after.
  void abort(const std::string& why) noexcept;
  // Waits until every rank has arrived; throws kInternal naming the first error when the group was
  // aborted, now or before.
  void meet();
  const FrCommApi* api;
  void* group = nullptr;
  const int32_t world;
  std::atomic<bool> aborted{false};
  std::string abort_reason;                         // set once, before `aborted`
  std::vector<FrMetricAccumulators> epoch_metrics;  // each rank's train metrics of the epoch ending

 private:
  std::mutex reason_mu_;
  sdk::RankBarrier ranks_;
};

}  // namespace fresco
