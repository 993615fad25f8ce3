// Central finite differences of a scalar loss computed in double precision, for gradient checks of backward
// kernels: g_i ~ (L(p + h e_i) - L(p - h e_i)) / 2h, for every index or a chosen subset. The loss is
// evaluated with the reference forward, so the check is independent of the kernel under test.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace fresco::ref {

// Numerical gradient of loss(p) at p for the given indices (p is restored afterwards).
template <class Loss>
std::vector<double> numeric_gradient(Loss&& loss, std::vector<double>& p, const std::vector<size_t>& indices,
                                     double h = 1e-4) {
  std::vector<double> g(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    const double saved = p[i];
    p[i] = saved + h;
    const double up = loss(p);
    p[i] = saved - h;
    const double down = loss(p);
    p[i] = saved;
    g[k] = (up - down) / (2.0 * h);
  }
  return g;
}

// Every index when n <= max_count, else max_count distinct indices drawn with a fixed seed (always including
// the first and the last element).
inline std::vector<size_t> check_indices(size_t n, size_t max_count, uint32_t seed = 7) {
  std::vector<size_t> idx;
  if (n <= max_count) {
    for (size_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  std::vector<bool> taken(n, false);
  idx.push_back(0);
  idx.push_back(n - 1);
  taken[0] = taken[n - 1] = true;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  while (idx.size() < max_count) {
    const size_t i = pick(rng);
    if (!taken[i]) taken[i] = true, idx.push_back(i);
  }
  return idx;
}

}  // namespace fresco::ref
