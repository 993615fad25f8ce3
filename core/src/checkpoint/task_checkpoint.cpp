// DeepLearningTask's checkpoints (deep_learning_task.h, save_checkpoint / load_checkpoint): which tensors,
// the header that names the job, and the checks before anything is written. The file itself is
// checkpoint_file.h's. Tests: tests/e2e/test_checkpoint_cpu.cpp.
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_file.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/executor.h"
#include "fresco/core/runtime.h"

namespace fresco {

using nlohmann::json;

std::vector<const DTensor*> DeepLearningTask::checkpoint_tensors() const {
  std::vector<const DTensor*> out;
  for (const DTensor& t : model_->base_plan().tensors()) {
    const Family f = region_family(t.region);
    if (f == Family::B || f == Family::W || f == Family::M || f == Family::V ||
        t.id == model_->t.step_scalars)
      out.push_back(&t);
  }
  return out;
}

std::string DeepLearningTask::checkpoint_header() const {
  json h;
  h["format"] = "fresco checkpoint";
  h["fresco"] = FRESCO_VERSION;
  h["model"] = bp_.describe();
  h["parameters"] = model_->arch.parameter_count;
  h["precision"] = dtype_name(precision_);
  h["optimizer"] = opt_.name();
  h["lr"] = opt_.lr;
  h["weight_decay"] = opt_.weight_decay;
  h["scheduler"] = sched_.name();
  h["warmup_epochs"] = sched_.warmup_epochs;
  h["batch"] = batch_;
  h["train_samples"] = train_.n;
  h["epochs"] = epochs_;
  h["seed"] = seed_;
  h["epochs_done"] = epochs_done_;
  h["device"] = device_;  // where it was written; not compared
  return h.dump();
}

void DeepLearningTask::save_checkpoint(const std::string& path) {
  require(Phase::COMPILED, "DeepLearningTask::save_checkpoint");
  checkpoint::Contents c;
  c.header = checkpoint_header();
  runtime_->synchronize();
  for (const DTensor* t : checkpoint_tensors()) {
    checkpoint::Record r;
    r.name = t->name;
    r.bytes.resize(static_cast<size_t>(t->shape.numel()) * dtype_size(t->dtype));
    runtime_->download(model_->base_plan(), t->id, r.bytes.data(), r.bytes.size());
    c.records.push_back(std::move(r));
  }
  checkpoint::write_file(path, c);
}

void DeepLearningTask::load_checkpoint(const std::string& path, bool weights_only) {
  require(Phase::COMPILED, "DeepLearningTask::load_checkpoint");
  const checkpoint::Contents c = checkpoint::read_file(path);
  json saved;
  try {
    saved = json::parse(c.header);
  } catch (const json::parse_error&) {
    throw Error(ErrorCode::kBadData, path + ": the checkpoint's header is not valid JSON");
  }
  FRESCO_CHECK(saved.is_object() && saved.value("format", "") == "fresco checkpoint", ErrorCode::kBadData,
               path + ": the header does not name a fresco checkpoint");
  // The job that wrote it must be this one, or the next epochs would not be the saved run's; for its
  // weights alone, the same model.
  const json here = json::parse(checkpoint_header());
  static const std::vector<const char*> kModel = {"model", "parameters"};
  static const std::vector<const char*> kJob = {"model", "parameters",    "precision", "optimizer",
                                                "lr",    "weight_decay",  "scheduler", "warmup_epochs",
                                                "batch", "train_samples", "epochs",    "seed"};
  for (const char* key : weights_only ? kModel : kJob) {
    FRESCO_CHECK(saved.contains(key), ErrorCode::kBadData, path + ": the header has no \"" + key + "\"");
    FRESCO_CHECK(saved[key] == here[key], ErrorCode::kBadConfig,
                 path + " was written by another job: " + key + " " + saved[key].dump() + " there, " +
                     here[key].dump() + " here");
  }
  FRESCO_CHECK(saved.contains("epochs_done") && saved["epochs_done"].is_number_integer(), ErrorCode::kBadData,
               path + ": the header has no \"epochs_done\"");
  const int64_t done = saved["epochs_done"].get<int64_t>();
  FRESCO_CHECK(
      done >= 0 && done <= epochs_, ErrorCode::kBadData,
      path + ": epochs_done " + std::to_string(done) + " is outside 0 to " + std::to_string(epochs_));
  if (weights_only) {
    load_checkpoint_weights(path, c);
    return;
  }
  // Every tensor by name and size before anything is written: a refused file leaves the job as it was.
  const std::vector<const DTensor*> targets = checkpoint_tensors();
  FRESCO_CHECK(c.records.size() == targets.size(), ErrorCode::kBadData,
               path + ": " + std::to_string(c.records.size()) + " tensors, this job has " +
                   std::to_string(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(targets[i]->shape.numel()) * dtype_size(targets[i]->dtype);
    FRESCO_CHECK(c.records[i].name == targets[i]->name, ErrorCode::kBadData,
                 path + ": expected tensor " + targets[i]->name + " at position " + std::to_string(i) +
                     ", found " + c.records[i].name);
    FRESCO_CHECK(c.records[i].bytes.size() == bytes, ErrorCode::kBadData,
                 path + ": tensor " + c.records[i].name + " has " +
                     std::to_string(c.records[i].bytes.size()) + " bytes, expected " + std::to_string(bytes));
  }
  for (size_t i = 0; i < targets.size(); ++i)
    runtime_->upload(model_->base_plan(), targets[i]->id, c.records[i].bytes.data(),
                     c.records[i].bytes.size());
  cast_weights();
  epochs_done_ = static_cast<int32_t>(done);
}

// The weights-only form: the B and W tensors found by name (the optimizer's state and the counters stay
// this job's), each checked for its size before any is written.
void DeepLearningTask::load_checkpoint_weights(const std::string& path, const checkpoint::Contents& c) {
  std::vector<std::pair<const DTensor*, const checkpoint::Record*>> writes;
  for (const DTensor* t : checkpoint_tensors()) {
    const Family f = region_family(t->region);
    if (f != Family::B && f != Family::W) continue;
    const checkpoint::Record* found = nullptr;
    for (const checkpoint::Record& r : c.records)
      if (r.name == t->name) found = &r;
    FRESCO_CHECK(found, ErrorCode::kBadData, path + ": no tensor " + t->name);
    const uint64_t bytes = static_cast<uint64_t>(t->shape.numel()) * dtype_size(t->dtype);
    FRESCO_CHECK(found->bytes.size() == bytes, ErrorCode::kBadData,
                 path + ": tensor " + t->name + " has " + std::to_string(found->bytes.size()) +
                     " bytes, expected " + std::to_string(bytes));
    writes.emplace_back(t, found);
  }
  for (const auto& [t, r] : writes)
    runtime_->upload(model_->base_plan(), t->id, r->bytes.data(), r->bytes.size());
  cast_weights();
}

}  // namespace fresco
