// The meeting point of a data-parallel job's ranks (host threads of one process) that an error on one rank
// can open for good: wait() returns false, now and at every later call, once abort() was called, so no rank
// waits for one that stopped. Shared by the core (the ranks' meeting at an epoch's end) and the cpu plugin's
// "threads" collective backend. Header-only C++17.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace fresco::sdk {

class RankBarrier {
 public:
  explicit RankBarrier(int32_t ranks) : ranks_(ranks) {}
  // Waits until every rank has arrived: true; false when the barrier was aborted before or meanwhile.
  bool wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
    return generation_ != generation;  // released by the last rank, or aborted first
  }
  // Every wait now and later returns false.
  void abort() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

 private:
  const int32_t ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int32_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

}  // namespace fresco::sdk
