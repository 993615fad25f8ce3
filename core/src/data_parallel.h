// The collective group of a data-parallel job's ranks (DeepLearningTask::ranks): made by the device's
// collective backend (plugin.h FrCommApi), shared by every rank's task, destroyed after their runtimes.
#pragma once

#include <atomic>

#include "fresco/plugin.h"

namespace fresco {

struct CommGroup {
  CommGroup(const FrCommApi* a, int32_t world);
  ~CommGroup();
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;
  // Every rank's collectives fail from now on instead of waiting (an error on one rank stops the others).
  void abort() noexcept;
  const FrCommApi* api;
  void* group = nullptr;
  std::atomic<bool> aborted{false};
};

}  // namespace fresco
