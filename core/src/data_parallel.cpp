// Data parallelism (DESIGN §10; DeepLearningTask::ranks): the ranks' group, their tasks (made and compiled
// by rank 0's), each rank's part of an epoch, and running every rank at once. Tests:
// tests/e2e/test_data_parallel_cpu.cpp, tests/plugins/cpu/test_comm_threads.cpp.
#include "data_parallel.h"

#include <exception>
#include <thread>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/executor.h"
#include "fresco/core/plugin_loader.h"
#include "fresco/core/runtime.h"

namespace fresco {

CommGroup::CommGroup(const FrCommApi* a, int32_t w)
    : api(a), world(w), epoch_metrics(static_cast<size_t>(w)), ranks_(w) {
  throw_if_error(api->group_create(world, &group),
                 std::string("creating a group of ") + std::to_string(world) + " ranks (" + api->name + ")");
}
CommGroup::~CommGroup() {
  if (group) api->group_destroy(group);
}
void CommGroup::abort(const std::string& why) noexcept {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    if (aborted) return;
    try {
      abort_reason = why;
    } catch (...) {  // no memory for the reason: the abort matters more
    }
    aborted = true;
  }
  ranks_.abort();
  api->group_abort(group);
}
void CommGroup::meet() {
  FRESCO_CHECK(ranks_.wait(), ErrorCode::kInternal, "the ranks stopped: " + abort_reason);
}

void DeepLearningTask::copy_settings_to(DeepLearningTask& t) const {
  // every setting of the builder but on_epoch (rank 0 reports); the data as loaded, so no rank reads it again
  t.bp_ = bp_;
  t.data_spec_ = data_spec_;
  t.have_data_ = have_data_;
  t.train_ = train_;
  t.test_ = test_;
  t.norm_ = norm_;
  t.norm_set_ = norm_set_;
  t.batch_ = batch_;
  t.val_batch_ = val_batch_;
  t.epochs_ = epochs_;
  t.loss_ = loss_;
  t.opt_ = opt_;
  t.sched_ = sched_;
  t.device_ = device_;
  t.seed_ = seed_;
  t.options_ = options_;
  t.augment_ = augment_;
  t.shuffle_ = shuffle_;
  t.progressive_ = progressive_;
  t.ranks_ = ranks_;
}

void DeepLearningTask::compile_ranks() {
  const FrCommApi* api = PluginRegistry::instance().comm(device_);
  FRESCO_CHECK(api, ErrorCode::kBadConfig,
               "ranks " + std::to_string(ranks_) + " on device '" + device_ +
                   "': no loaded plugin has a collective backend for it (the cpu plugin's 'threads' serves "
                   "cpu, libfresco-nccl cuda)");
  try {
    group_ = std::make_shared<CommGroup>(api, ranks_);
    for (int32_t r = 1; r < ranks_; ++r) {
      auto t = std::make_unique<DeepLearningTask>();
      copy_settings_to(*t);
      t->rank_ = r;
      t->group_ = group_;
      try {
        t->plan();
      } catch (const Error& e) {
        throw Error(e.code(), "rank " + std::to_string(r) + ": " + e.what());
      }
      replicas_.push_back(std::move(t));
    }
    on_every_rank([](DeepLearningTask& t) { t.compile_this_rank(); });
  } catch (...) {  // back to MEMORY_LOCKED with no rank made: compile() may be called again
    replicas_.clear();
    exec_.reset();
    runtime_.reset();
    group_.reset();
    phase_ = Phase::MEMORY_LOCKED;
    throw;
  }
}

void DeepLearningTask::require_ranks_usable(const char* call, bool moves_position) const {
  if (!group_) return;
  FRESCO_CHECK(!group_->aborted, ErrorCode::kUsage,
               std::string("DeepLearningTask::") + call +
                   ": the ranks stopped after an error, their states may differ (compile a new task): " +
                   group_->abort_reason);
  if (!moves_position) return;
  FRESCO_CHECK(
      !in_ranks_, ErrorCode::kUsage,
      std::string("DeepLearningTask::") + call +
          " from inside a run of the ranks (an on_epoch callback): the other ranks are waiting in it");
  for (const auto& r : replicas_)
    FRESCO_CHECK(r->epochs_done_ == epochs_done_ && r->epoch_steps_done_ == epoch_steps_done_,
                 ErrorCode::kInternal,
                 std::string("DeepLearningTask::") + call + ": rank " + std::to_string(r->rank_) +
                     " is at epoch " + std::to_string(r->epochs_done_) + " step " +
                     std::to_string(r->epoch_steps_done_) + ", rank 0 at epoch " +
                     std::to_string(epochs_done_) + " step " + std::to_string(epoch_steps_done_));
}

void DeepLearningTask::on_all_ranks_or_stop(const char* what,
                                            const std::function<void(DeepLearningTask&)>& f) {
  try {
    f(*this);
    for (auto& r : replicas_) f(*r);
  } catch (const std::exception& e) {
    // some ranks may hold the new state and others not: none may train on
    if (group_) group_->abort(std::string(what) + " failed part way: " + e.what());
    throw;
  }
}

void DeepLearningTask::on_every_rank(const std::function<void(DeepLearningTask&)>& f) {
  // (the callers checked the group: run and run_steps with require_ranks_usable, compile_ranks made it)
  struct InRanks {  // a callback on rank 0 may not start another run of the ranks
    bool& flag;
    explicit InRanks(bool& f) : flag(f) { flag = true; }
    ~InRanks() { flag = false; }
  } in_ranks(in_ranks_);
  std::vector<std::exception_ptr> errors(replicas_.size() + 1);
  std::atomic<int> first_failed{-1};
  auto run = [&](DeepLearningTask& t, size_t i) {
    try {
      f(t);
    } catch (...) {
      errors[i] = std::current_exception();
      int none = -1;
      if (first_failed.compare_exchange_strong(none, static_cast<int>(i))) {
        try {  // the reason, when it can be told (a failure to build it still aborts)
          std::string why = "rank " + std::to_string(i) + " failed";
          try {
            throw;
          } catch (const std::exception& e) {
            why = "rank " + std::to_string(i) + ": " + e.what();
          } catch (...) {
          }
          group_->abort(why);  // the others fail at their next collective or meeting instead of waiting
        } catch (...) {
          group_->abort("a rank failed");
        }
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(replicas_.size());
  try {
    for (size_t i = 0; i < replicas_.size(); ++i) threads.emplace_back(run, std::ref(*replicas_[i]), i + 1);
  } catch (...) {  // no thread for a rank: stop those started
    group_->abort("a rank's thread could not be started");
    for (auto& t : threads) t.join();
    throw;
  }
  run(*this, 0);
  for (auto& t : threads) t.join();
  // the first rank to fail holds the cause; the others failed because the group was aborted
  const int i = first_failed.load();
  if (i >= 0) {
    try {
      std::rethrow_exception(errors[static_cast<size_t>(i)]);
    } catch (const Error& e) {
      throw Error(e.code(), "rank " + std::to_string(i) + ": " + e.what() + " (every rank stopped)");
    }
  }
}

std::vector<uint32_t> DeepLearningTask::rank_order(const std::vector<uint32_t>& order) const {
  // PyTorch's DistributedSampler: padded to a multiple of the ranks by repeating the order's start, then
  // every ranks-th sample from this rank's
  const size_t n = order.size(), per = (n + static_cast<size_t>(ranks_) - 1) / static_cast<size_t>(ranks_);
  std::vector<uint32_t> mine(per);
  for (size_t k = 0; k < per; ++k)
    mine[k] = order[(static_cast<size_t>(rank_) + k * static_cast<size_t>(ranks_)) % n];
  return mine;
}

void DeepLearningTask::require_one_rank(const char* call) const {
  FRESCO_CHECK(ranks_ == 1, ErrorCode::kUsage,
               std::string("DeepLearningTask::") + call + " runs one rank's step; this job has " +
                   std::to_string(ranks_) + " ranks (use run() or run_steps())");
}

std::vector<std::pair<std::string, std::vector<float>>> DeepLearningTask::snapshot_of_rank(int32_t r) {
  FRESCO_CHECK(r >= 0 && r < ranks_, ErrorCode::kUsage,
               "snapshot_of_rank: rank " + std::to_string(r) + " of " + std::to_string(ranks_));
  return r == 0 ? snapshot() : replicas_.at(static_cast<size_t>(r - 1))->snapshot();
}

}  // namespace fresco
