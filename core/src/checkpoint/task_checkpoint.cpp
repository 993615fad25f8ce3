// DeepLearningTask's checkpoints (deep_learning_task.h, save_checkpoint / load_checkpoint): which tensors,
// the header that names the job and the data position, and the checks before anything is written. The file
// itself is checkpoint_file.h's. Tests: tests/e2e/test_checkpoint_cpu.cpp.
#include <nlohmann/json.hpp>

#include <cstring>

#include "checkpoint/checkpoint_file.h"
#include "data_parallel.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/executor.h"
#include "fresco/core/runtime.h"

namespace fresco {

using nlohmann::json;

namespace {
// The record of a checkpoint written within an epoch: that epoch's train metric sums so far.
constexpr const char* kEpochMetricsRecord = "metrics.train";
}  // namespace

std::vector<const DTensor*> DeepLearningTask::checkpoint_tensors() const {
  std::vector<const DTensor*> out;
  for (const DTensor& t : model_->base_plan().tensors()) {
    const Family f = region_family(t.region);
    if (f == Family::B || f == Family::W || f == Family::M || f == Family::V || f == Family::E ||
        t.id == model_->t.step_scalars)
      out.push_back(&t);
  }
  return out;
}

// A tensor's name in a checkpoint: its plan name with the layer's generated name ("fc51") replaced by the
// layer's BluePrint path ("[3]"), so it does not depend on the cast layers mixed precision inserts (which
// shift the generated indices): "[3].weight", "M([5.main.0].weight)", "[1].running_mean", "step_scalars".
std::string DeepLearningTask::checkpoint_name(const DTensor& t) const {
  if (t.layer < 0 || t.layer >= static_cast<int32_t>(model_->arch.layers.size())) return t.name;
  const LayerDescriptor& l = model_->arch.layers[static_cast<size_t>(t.layer)];
  const size_t at = t.name.find(l.name + ".");
  if (at == std::string::npos || (at > 0 && t.name[at - 1] != '(')) return t.name;
  return t.name.substr(0, at) + "[" + l.spec.path + "]" + t.name.substr(at + l.name.size());
}

std::string DeepLearningTask::checkpoint_header() const {
  json h;
  h["format"] = "fresco checkpoint";
  h["fresco"] = FRESCO_VERSION;
  h["model"] = bp_.describe();
  h["parameters"] = model_->arch.parameter_count;
  h["precision"] = dtype_name(options_.precision);
  // everything else the next epochs' numbers depend on
  h["optimizer"] = {{"type", opt_.name()},
                    {"lr", opt_.lr},
                    {"momentum", opt_.momentum},
                    {"nesterov", opt_.nesterov},
                    {"weight_decay", opt_.weight_decay},
                    {"beta1", opt_.beta1},
                    {"beta2", opt_.beta2},
                    {"eps", opt_.eps},
                    {"no_decay_1d", opt_.no_decay_1d}};
  if (opt_.type == Optimizer::Type::LARS)
    h["optimizer"]["eta"] = opt_.eta;  // (other kinds' headers as before)
  h["scheduler"] = {{"type", sched_.name()},
                    {"warmup_epochs", sched_.warmup_epochs},
                    {"min_lr", sched_.min_lr},
                    {"table", sched_.table},
                    {"step_size", sched_.step_size},
                    {"gamma", sched_.gamma},
                    {"milestones", sched_.milestones},
                    {"power", sched_.power},
                    {"total_epochs", sched_.total_epochs},
                    {"t0", sched_.t0},
                    {"t_mult", sched_.t_mult}};
  if (!sched_.momenta.empty()) h["scheduler"]["momenta"] = sched_.momenta;  // a table's (others as before)
  if (sched_.type == Scheduler::Type::ONE_CYCLE)  // its own settings (other kinds' headers stay as they were)
    h["scheduler"]["one_cycle"] = {
        {"pct_start", sched_.pct_start},         {"anneal", sched_.anneal_linear ? "linear" : "cos"},
        {"div_factor", sched_.div_factor},       {"final_div_factor", sched_.final_div_factor},
        {"three_phase", sched_.three_phase},     {"cycle_momentum", sched_.cycle_momentum},
        {"base_momentum", sched_.base_momentum}, {"max_momentum", sched_.max_momentum}};
  h["loss"] = {{"label_smoothing", loss_.smoothing}};
  h["augment"] = {{"crop_pad", augment_.crop_pad}, {"flip", augment_.flip}, {"cutout", augment_.cutout}};
  h["normalize"] = {{"mean", norm_.mean}, {"std", norm_.std}};
  h["data"] = {{"train_samples", train_.n},     {"h", train_.h},      {"w", train_.w}, {"c", train_.c},
               {"classes", train_.num_classes}, {"shuffle", shuffle_}};
  h["batch"] = batch_;
  h["epochs"] = epochs_;
  h["seed"] = seed_;
  h["freeze_first_layer"] = options_.freeze_first_layer;
  h["ema"] = {{"decay", options_.ema_decay}, {"every", options_.ema_every}};
  if (ranks_ > 1) h["ranks"] = ranks_;  // each rank's part of an epoch depends on it (one rank: no key)
  // the stages' sizes as resolved (0: the data's), and only when one differs from the data's: equal jobs
  // have equal headers (a job without stages keeps its header as before)
  const Shape begin = model_->sample_of[static_cast<int>(Variant::TRAIN_BASE)],
              end = model_->sample_of[static_cast<int>(Variant::TRAIN_LOWRES)];
  if (begin.h != train_.h || begin.w != train_.w || end.h != train_.h || end.w != train_.w)
    h["progressive_resolution"] = {
        {"begin", {begin.h, begin.w}}, {"end", {end.h, end.w}}, {"begin_epochs", progressive_.begin_epochs}};
  h["epochs_done"] = epochs_done_;
  h["epoch_steps_done"] = epoch_steps_done_;  // the data position within the next epoch (absent before: 0)
  h["device"] = device_;                      // where it was written; not compared
  return h.dump();
}

void DeepLearningTask::save_checkpoint(const std::string& path) {
  require(Phase::COMPILED, "DeepLearningTask::save_checkpoint");
  FRESCO_CHECK(
      !group_ || !group_->aborted, ErrorCode::kUsage,
      "save_checkpoint: the ranks stopped after an error, their states may differ (compile a new task): " +
          group_->abort_reason);
  FRESCO_CHECK(!steps_outside_run_, ErrorCode::kUsage,
               "save_checkpoint: training steps were taken with train_step() since the last run() or "
               "run_steps(); a checkpoint holds the state at a step of those");
  checkpoint::Contents c;
  c.header = checkpoint_header();
  runtime_->synchronize();
  for (const DTensor* t : checkpoint_tensors()) {
    checkpoint::Record r;
    r.name = checkpoint_name(*t);
    r.bytes.resize(static_cast<size_t>(t->shape.numel()) * dtype_size(t->dtype));
    runtime_->download(model_->base_plan(), t->id, r.bytes.data(), r.bytes.size());
    c.records.push_back(std::move(r));
  }
  if (epoch_steps_done_ > 0) {  // within an epoch: its train metrics so far (every rank's), for its report
    FrMetricAccumulators sum = exec_->read_metrics(true);
    for (auto& rep : replicas_) add_metrics(sum, rep->exec_->read_metrics(true));
    checkpoint::Record r;
    r.name = kEpochMetricsRecord;
    r.bytes.resize(sizeof(FrMetricAccumulators));
    std::memcpy(r.bytes.data(), &sum, sizeof(sum));
    c.records.push_back(std::move(r));
  }
  checkpoint::write_file(path, c);
}

void DeepLearningTask::load_checkpoint(const std::string& path, bool weights_only) {
  require(Phase::COMPILED, "DeepLearningTask::load_checkpoint");
  require_ranks_usable("load_checkpoint");
  const checkpoint::Contents c = checkpoint::read_file(path);
  // every rank from the same contents: rank 0 checks them first, and the ranks' plans are the same
  on_all_ranks_or_stop("load_checkpoint",
                       [&](DeepLearningTask& t) { t.load_checkpoint_contents(path, c, weights_only); });
}

void DeepLearningTask::load_checkpoint_contents(const std::string& path, const checkpoint::Contents& c,
                                                bool weights_only) {
  json saved;
  try {
    saved = json::parse(c.header);
  } catch (const json::exception&) {
    throw Error(ErrorCode::kBadData, path + ": the checkpoint's header is not valid JSON");
  }
  const auto format = saved.is_object() ? saved.find("format") : saved.end();
  FRESCO_CHECK(saved.is_object() && format != saved.end() && *format == "fresco checkpoint",
               ErrorCode::kBadData, path + ": the header does not name a fresco checkpoint");
  // The job that wrote it must be this one, or the next epochs would not be the saved run's; for its
  // weights alone, the same model.
  const json here = json::parse(checkpoint_header());
  static const std::vector<const char*> kModel = {"model", "parameters"};
  static const std::vector<const char*> kJob = {
      "model", "parameters", "precision", "optimizer", "scheduler",          "loss", "augment", "normalize",
      "data",  "batch",      "epochs",    "seed",      "freeze_first_layer", "ema"};
  for (const char* key : weights_only ? kModel : kJob) {
    FRESCO_CHECK(saved.contains(key), ErrorCode::kBadData, path + ": the header has no \"" + key + "\"");
    if (saved[key] == here[key]) continue;
    std::string what = key, there = saved[key].dump(), mine = here[key].dump();
    if (saved[key].is_object() && here[key].is_object())  // name the field that differs
      for (const auto& [k, v] : here[key].items())
        if (!saved[key].contains(k) || saved[key][k] != v) {
          what = std::string(key) + "." + k;
          there = saved[key].contains(k) ? saved[key][k].dump() : "absent";
          mine = v.dump();
          break;
        }
    throw Error(ErrorCode::kBadConfig,
                path + " was written by another job: " + what + " " + there + " there, " + mine + " here");
  }
  if (weights_only) {
    load_checkpoint_weights(path, c);
    return;
  }
  // keys a job has only with the setting (its headers stayed as they were without it)
  for (const char* key : {"progressive_resolution", "ranks"}) {
    const json none = "absent";
    const json& there = saved.contains(key) ? saved[key] : none;
    const json& mine = here.contains(key) ? here[key] : none;
    FRESCO_CHECK(there == mine, ErrorCode::kBadConfig,
                 path + " was written by another job: " + key + " " + there.dump() + " there, " +
                     mine.dump() + " here");
  }
  const auto done_at = saved.find("epochs_done");
  FRESCO_CHECK(done_at != saved.end() && done_at->is_number_integer(), ErrorCode::kBadData,
               path + ": the header has no \"epochs_done\"");
  const int64_t done = done_at->get<int64_t>();
  FRESCO_CHECK(
      done >= 0 && done <= epochs_, ErrorCode::kBadData,
      path + ": epochs_done " + std::to_string(done) + " is outside 0 to " + std::to_string(epochs_));
  const auto steps_at = saved.find("epoch_steps_done");  // absent in checkpoints from before it existed
  FRESCO_CHECK(steps_at == saved.end() || steps_at->is_number_integer(), ErrorCode::kBadData,
               path + ": epoch_steps_done is not a whole number");
  const int64_t within = steps_at == saved.end() ? 0 : steps_at->get<int64_t>();
  const int64_t spe = model_->options.steps_per_epoch;
  FRESCO_CHECK(within == 0 || (within > 0 && within < spe && done < epochs_), ErrorCode::kBadData,
               path + ": epoch_steps_done " + std::to_string(within) + " is outside 0 to " +
                   std::to_string(spe - 1) + " steps of epoch " + std::to_string(done + 1));
  // Every tensor by name and size before anything is written: a refused file leaves the job as it was.
  const std::vector<const DTensor*> targets = checkpoint_tensors();
  const size_t expected = targets.size() + (within > 0 ? 1 : 0);  // and the epoch's metrics so far
  FRESCO_CHECK(c.records.size() == expected, ErrorCode::kBadData,
               path + ": " + std::to_string(c.records.size()) +
                   " records, this job's checkpoint at this point has " + std::to_string(expected));
  if (within > 0)
    FRESCO_CHECK(c.records.back().name == kEpochMetricsRecord &&
                     c.records.back().bytes.size() == sizeof(FrMetricAccumulators),
                 ErrorCode::kBadData,
                 path + ": the last record should be the epoch's train metrics (" + kEpochMetricsRecord +
                     "), found " + c.records.back().name);
  for (size_t i = 0; i < targets.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(targets[i]->shape.numel()) * dtype_size(targets[i]->dtype);
    const std::string name = checkpoint_name(*targets[i]);
    FRESCO_CHECK(c.records[i].name == name, ErrorCode::kBadData,
                 path + ": expected tensor " + name + " at position " + std::to_string(i) + ", found " +
                     c.records[i].name);
    FRESCO_CHECK(c.records[i].bytes.size() == bytes, ErrorCode::kBadData,
                 path + ": tensor " + c.records[i].name + " has " +
                     std::to_string(c.records[i].bytes.size()) + " bytes, expected " + std::to_string(bytes));
  }
  for (size_t i = 0; i < targets.size(); ++i)
    runtime_->upload(model_->base_plan(), targets[i]->id, c.records[i].bytes.data(),
                     c.records[i].bytes.size());
  if (within > 0) {  // the epoch's train metrics so far, all ranks' (save_checkpoint): on rank 0
    FrMetricAccumulators m{};
    if (rank_ == 0) std::memcpy(&m, c.records.back().bytes.data(), sizeof(m));
    runtime_->upload(model_->base_plan(), model_->t.acc_train, &m, sizeof(m));
  }
  cast_weights();
  epochs_done_ = static_cast<int32_t>(done);
  epoch_steps_done_ = within;
  steps_outside_run_ = false;
  logged_stage_ = -1;  // the resumed run names its stage
}

// The weights-only form: the B and W tensors found by name (the optimizer's state and the counters stay
// this job's), each checked for its size before any is written; this job's EMA (E) takes the file's average
// where the file has one, else the loaded weights.
void DeepLearningTask::load_checkpoint_weights(const std::string& path, const checkpoint::Contents& c) {
  std::vector<std::pair<const DTensor*, const checkpoint::Record*>> writes;
  auto record = [&](const std::string& name) -> const checkpoint::Record* {
    for (const checkpoint::Record& r : c.records)
      if (r.name == name) return &r;
    return nullptr;
  };
  for (const DTensor* t : checkpoint_tensors()) {
    const Family f = region_family(t->region);
    if (f != Family::B && f != Family::W && f != Family::E) continue;
    const std::string name = checkpoint_name(*t);
    const checkpoint::Record* found = record(name);
    if (!found && f == Family::E) found = record(checkpoint_name(model_->base_plan().tensor(t->param_of)));
    FRESCO_CHECK(found, ErrorCode::kBadData, path + ": no tensor " + name);
    const uint64_t bytes = static_cast<uint64_t>(t->shape.numel()) * dtype_size(t->dtype);
    FRESCO_CHECK(found->bytes.size() == bytes, ErrorCode::kBadData,
                 path + ": tensor " + name + " has " + std::to_string(found->bytes.size()) +
                     " bytes, expected " + std::to_string(bytes));
    writes.emplace_back(t, found);
  }
  for (const auto& [t, r] : writes)
    runtime_->upload(model_->base_plan(), t->id, r->bytes.data(), r->bytes.size());
  cast_weights();
}

}  // namespace fresco
