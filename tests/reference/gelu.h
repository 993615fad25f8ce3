// Reference element-wise and layout ops in double precision: exact GELU y = x * Phi(x) = 0.5 x (1 + erf(x /
// sqrt 2)) and its backward dx = dy * (Phi(x) + x phi(x)); add; flatten_chw (NHWC -> PyTorch's C,H,W order
// per sample) and its inverse. Used by test_add_gelu_flatten.cpp (finite differences there) and
// fresco-plugin-check.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace fresco::ref {

inline std::vector<double> gelu(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
  return y;
}

inline std::vector<double> gelu_backward(const std::vector<double>& dy, const std::vector<double>& x) {
  const double inv_sqrt_2pi = 0.3989422804014327;
  std::vector<double> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double cdf = 0.5 * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
  return dx;
}

inline std::vector<double> add(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

// x [n,h,w,c] -> y [n, c*h*w] with y[b, (ch*h + i)*w + j] = x[b, i, j, ch].
template <class T>
std::vector<T> flatten_chw(const std::vector<T>& x, int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<T> y(x.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t ch = 0; ch < c; ++ch)
          y[static_cast<size_t>(b * c * h * w + (ch * h + i) * w + j)] =
              x[static_cast<size_t>(((b * h + i) * w + j) * c + ch)];
  return y;
}

// The inverse permutation: dy [n, c*h*w] -> dx [n,h,w,c].
template <class T>
std::vector<T> flatten_chw_backward(const std::vector<T>& dy, int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<T> dx(dy.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t ch = 0; ch < c; ++ch)
          dx[static_cast<size_t>(((b * h + i) * w + j) * c + ch)] =
              dy[static_cast<size_t>(b * c * h * w + (ch * h + i) * w + j)];
  return dx;
}

}  // namespace fresco::ref
