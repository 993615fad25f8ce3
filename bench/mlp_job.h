// The benchmarked MLP job (issue: 784-1024-512-256-10, AdamW lr 1e-3 wd 1e-4, label smoothing 0.1, fp32,
// Fashion-MNIST), configured once for bench_mlp_epoch and bench_step_profile.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/core/deep_learning_task.h"

namespace fresco::bench {

inline DeepLearningTask& configure_mlp(DeepLearningTask& task, const std::string& data_dir, int64_t batch,
                                       const std::string& device) {
  return task.model(seq({fc(1024), relu(), fc(512), relu(), fc(256), relu(), fc(10)}))
      .data(FashionMnist(data_dir))
      .batch_size(batch)
      .loss(CrossEntropyLoss().label_smoothing(0.1f))
      .optimizer(AdamW().base_lr(1e-3f).with_weight_decay(1e-4f))
      .device(device);
}

}  // namespace fresco::bench
