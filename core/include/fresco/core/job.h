// Job descriptions: a JSON file naming model, data, loss, optimizer, scheduler, epochs, batch, seed and
// device, turned into a configured DeepLearningTask. Unknown keys and wrong types are errors naming the file
// and key (nothing is silently ignored). Tested by tests/core/test_job.cpp; examples in jobs/.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/core/blueprint.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/train_config.h"

namespace fresco {

struct JobSpec {
  std::string name;
  std::string source;  // file it came from
  BluePrint model;
  DataSpec data;
  bool normalize_set = false;
  Normalization normalize;
  int64_t batch_size = 128;
  int32_t epochs = 1;
  uint64_t seed = 0;
  std::string device = "auto";
  data::Augmentation augment;       // "augment": {"crop_pad": N, "flip": true|false}
  DType precision = DType::F32;     // "precision": "fp32" | "bf16" | "fp16" (fp16 and bf16 need a GPU)
  bool freeze_first_layer = false;  // "freeze_first_layer": true (CompileOptions::freeze_first_layer)
  double ema_decay = 0.0;           // "ema": {"decay": d, "every": k} (DeepLearningTask::ema); 0: none
  int32_t ema_every = 1;
  // "progressive_resolution": {"begin": side or [h, w], "end": ..., "begin_epochs": n} (either size absent:
  // the data's); DeepLearningTask::progressive_resolution
  ProgressiveResolution progressive;
  int32_t ranks = 1;  // "ranks": n, data parallelism over n devices (DeepLearningTask::ranks)
  CrossEntropyLoss loss;
  Optimizer optimizer = AdamW();
  Scheduler scheduler;
};

JobSpec parse_job(const std::string& json_text, const std::string& source);
// A file's job; a relative "data.path" in it is taken from the file's folder.
JobSpec load_job(const std::string& path);
// "fp32", "bf16" or "fp16" as a compute precision; anything else is kBadConfig naming `where`.
DType parse_precision(const std::string& name, const std::string& where);
void configure(DeepLearningTask& task, const JobSpec& job);

}  // namespace fresco
