// Reference learning-rate schedules as sdk/include/fresco/ops.h documents them, for step index s (steps taken
// so far): linear warm-up base * (s + 1) / W for s < W; then constant base, or cosine min + (base - min) * (1
// + cos(pi * min(s - W, T - W) / (T - W))) / 2 (PyTorch CosineAnnealingLR after a LinearLR warm-up, T = total
// steps), or table[min(s, len - 1)]. Used by tests/plugins/cpu/test_range_ops.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace fresco::ref {

inline double warmup_lr(double base, int64_t s, int64_t warmup) {
  return base * static_cast<double>(s + 1) / static_cast<double>(warmup);
}

inline double constant_lr(double base, int64_t warmup, int64_t s) {
  return s < warmup ? warmup_lr(base, s, warmup) : base;
}

inline double cosine_lr(double base, double min_lr, int64_t warmup, int64_t total, int64_t s) {
  if (s < warmup) return warmup_lr(base, s, warmup);
  const int64_t span = total - warmup;
  const double t =
      span > 0 ? static_cast<double>(std::min(s - warmup, span)) / static_cast<double>(span) : 1.0;
  return min_lr + (base - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

inline double table_lr(const std::vector<float>& table, double base, int64_t s) {
  if (table.empty()) return base;
  return table[static_cast<size_t>(std::min<int64_t>(s, static_cast<int64_t>(table.size()) - 1))];
}

}  // namespace fresco::ref
