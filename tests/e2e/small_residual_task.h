// The small residual network the CPU fusion tests train (test_fused_join_cpu.cpp, test_conv_stats_cpu.cpp):
// a stem, an identity block whose main branch ends in a bn, and a projection block with a bn on both
// branches; 32 synthetic 3-channel patches, batch 16, SGD Nesterov. Steps run over fixed sample indices.
#pragma once

#include <numeric>
#include <vector>

#include "fresco/core/deep_learning_task.h"

namespace fresco::test {

inline void configure_small_residual(DeepLearningTask& t) {
  t.model(
       seq({conv(8, 3, 1, 1), bn(), relu(),
            residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(),
            residual({conv(16, 3, 2, 1), bn(), relu(), conv(16, 3, 1, 1), bn()}, {conv(16, 1, 2, 0), bn()}),
            relu(), gap(), fc(4)}))
      .data(data::synthetic_patches(32, 1), data::synthetic_patches(16, 2))
      .batch_size(16)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .device("cpu")
      .shuffle(false);
}

// The losses of `steps` training steps of a compiled task, alternating the two halves of the 32 samples.
inline std::vector<float> train_small_residual(DeepLearningTask& t, int steps) {
  std::vector<uint32_t> idx(32);
  std::iota(idx.begin(), idx.end(), 0u);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) losses.push_back(t.train_step(idx.data() + 16 * (s % 2), 16));
  return losses;
}

}  // namespace fresco::test
