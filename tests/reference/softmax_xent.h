// Reference softmax cross-entropy in double precision, PyTorch CrossEntropyLoss(label_smoothing=e,
// reduction='mean'): target q = (1 - e) * onehot(y) + e / C, loss = mean over rows of -sum_c q_c log
// softmax(z)_c; gradient (softmax - q) / M; top-1 hits use the first maximum. Used by
// tests/plugins/cpu/test_softmax_xent.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace fresco::ref {

// log softmax of one row, computed stably (shifted by the row maximum).
inline std::vector<double> log_softmax_row(const double* z, int64_t c) {
  double mx = z[0];
  for (int64_t j = 1; j < c; ++j) mx = z[j] > mx ? z[j] : mx;
  double s = 0.0;
  for (int64_t j = 0; j < c; ++j) s += std::exp(z[j] - mx);
  const double lse = mx + std::log(s);
  std::vector<double> out(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) out[static_cast<size_t>(j)] = z[j] - lse;
  return out;
}

inline double smoothed_target(int64_t j, int32_t label, int64_t c, double eps) {
  return (j == label ? 1.0 - eps : 0.0) + eps / static_cast<double>(c);
}

// Mean loss over the m rows of z [m, c].
inline double softmax_xent_loss(const std::vector<double>& z, const std::vector<int32_t>& labels, int64_t m,
                                int64_t c, double eps) {
  double total = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<double> lp = log_softmax_row(&z[static_cast<size_t>(i * c)], c);
    for (int64_t j = 0; j < c; ++j)
      total -= smoothed_target(j, labels[static_cast<size_t>(i)], c, eps) * lp[static_cast<size_t>(j)];
  }
  return total / static_cast<double>(m);
}

inline std::vector<double> softmax_xent_grad(const std::vector<double>& z, const std::vector<int32_t>& labels,
                                             int64_t m, int64_t c, double eps) {
  std::vector<double> g(z.size());
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<double> lp = log_softmax_row(&z[static_cast<size_t>(i * c)], c);
    for (int64_t j = 0; j < c; ++j)
      g[static_cast<size_t>(i * c + j)] = (std::exp(lp[static_cast<size_t>(j)]) -
                                           smoothed_target(j, labels[static_cast<size_t>(i)], c, eps)) /
                                          static_cast<double>(m);
  }
  return g;
}

// Rows whose first maximum is at the label.
inline int64_t top1_hits(const std::vector<double>& z, const std::vector<int32_t>& labels, int64_t m,
                         int64_t c) {
  int64_t hits = 0;
  for (int64_t i = 0; i < m; ++i) {
    int64_t arg = 0;
    for (int64_t j = 1; j < c; ++j)
      if (z[static_cast<size_t>(i * c + j)] > z[static_cast<size_t>(i * c + arg)]) arg = j;
    hits += arg == labels[static_cast<size_t>(i)] ? 1 : 0;
  }
  return hits;
}

}  // namespace fresco::ref
