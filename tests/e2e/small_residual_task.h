// The small residual network the CPU fusion tests train (test_fused_join_cpu.cpp, test_conv_stats_cpu.cpp):
// a stem, an identity block whose main branch ends in a bn, and a projection block with a bn on both
// branches; 32 synthetic 3-channel patches, batch 16, SGD Nesterov. Steps run over fixed sample indices.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <string>
#include <utility>
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

// Two trainings of the small residual network, configured and then changed by `a` and `b`, that must give the
// same bits: the same losses and every tensor equal (an option that only reorders nodes or moves them between
// streams, which the CPU runs in order anyway).
inline void expect_same_bits(const std::function<void(DeepLearningTask&)>& a,
                             const std::function<void(DeepLearningTask&)>& b, int steps = 6) {
  std::vector<float> losses[2];
  std::vector<std::pair<std::string, std::vector<float>>> snaps[2];
  for (int k = 0; k < 2; ++k) {
    DeepLearningTask t;
    configure_small_residual(t);
    (k == 0 ? a : b)(t);
    t.compile();
    losses[k] = train_small_residual(t, steps);
    snaps[k] = t.snapshot();
  }
  ASSERT_EQ(losses[0].size(), losses[1].size());
  for (size_t i = 0; i < losses[0].size(); ++i) EXPECT_EQ(losses[0][i], losses[1][i]) << "step " << i;
  EXPECT_NE(losses[0].front(), losses[0].back());  // it really trained
  ASSERT_EQ(snaps[0].size(), snaps[1].size());
  for (size_t i = 0; i < snaps[0].size(); ++i) {
    EXPECT_EQ(snaps[0][i].first, snaps[1][i].first);
    ASSERT_EQ(snaps[0][i].second.size(), snaps[1][i].second.size()) << snaps[0][i].first;
    EXPECT_EQ(0, std::memcmp(snaps[0][i].second.data(), snaps[1][i].second.data(),
                             snaps[0][i].second.size() * sizeof(float)))
        << snaps[0][i].first;
  }
}

// Two trainings of the small residual network that differ only in rounding (a fused path against the plain
// one, test_conv_stats_cpu.cpp, test_grad_sums_cpu.cpp): losses within 1e-5, every tensor within 1e-4 of its
// largest value, and the run really trained.
using Snapshot = std::vector<std::pair<std::string, std::vector<float>>>;
// The largest |a - b| relative to the largest |b| (the absolute difference when b is all zero).
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t j = 0; j < a.size() && j < b.size(); ++j) {
    num = std::max(num, std::fabs(static_cast<double>(a[j]) - b[j]));
    den = std::max(den, std::fabs(static_cast<double>(b[j])));
  }
  return den > 0.0 ? num / den : num;
}

inline void expect_same_training(const std::vector<float>& losses, const Snapshot& state,
                                 const std::vector<float>& want_losses, const Snapshot& want_state) {
  ASSERT_EQ(losses.size(), want_losses.size());
  for (size_t s = 0; s < losses.size(); ++s)
    EXPECT_NEAR(losses[s], want_losses[s], 1e-5 * std::fabs(want_losses[s])) << "step " << s;
  ASSERT_EQ(state.size(), want_state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(state[i].first, want_state[i].first);
    const std::vector<float>&a = state[i].second, &b = want_state[i].second;
    ASSERT_EQ(a.size(), b.size()) << state[i].first;
    EXPECT_LT(max_rel_diff(a, b), 1e-4) << state[i].first;
  }
  EXPECT_NE(losses.front(), losses.back());  // it really trained
}

// The bytes of a checkpoint of `t` saved to `path`: every tensor a later run depends on (weights, buffers,
// the EMA, batchnorm's statistics) and the step scalars, to compare two trainings whole.
inline std::string checkpoint_bytes(DeepLearningTask& t, const std::string& path) {
  t.save_checkpoint(path);
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace fresco::test
