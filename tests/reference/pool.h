// Reference 2-D pooling on NHWC maps in double precision (PyTorch semantics): max pool (padding never wins,
// ties go to the first maximum in row-major window order, the gradient goes to that element), average pool
// with count_include_pad (divisor kh*kw), global average pool, and their backwards. Used by test_pool.cpp
// (checked there by finite differences) and fresco-plugin-check.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace fresco::ref {

struct PoolShape {
  int64_t n, h, w, c;
  int64_t kh, kw, sh, sw, ph, pw;
  int64_t p() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t q() const { return (w + 2 * pw - kw) / sw + 1; }
  size_t in_size() const { return static_cast<size_t>(n * h * w * c); }
  size_t out_size() const { return static_cast<size_t>(n * p() * q() * c); }
  size_t xi(int64_t b, int64_t y, int64_t x, int64_t ch) const {
    return static_cast<size_t>(((b * h + y) * w + x) * c + ch);
  }
  size_t yi(int64_t b, int64_t y, int64_t x, int64_t ch) const {
    return static_cast<size_t>(((b * p() + y) * q() + x) * c + ch);
  }
};

// Index into x of the first maximum of output element (b, i, j, ch); -1 if the window has no valid element.
inline int64_t max_pool_argmax(const std::vector<double>& x, const PoolShape& s, int64_t b, int64_t i,
                               int64_t j, int64_t ch) {
  int64_t arg = -1;
  double best = -std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < s.kh; ++r)
    for (int64_t t = 0; t < s.kw; ++t) {
      const int64_t yy = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + t;
      if (yy < 0 || yy >= s.h || xx < 0 || xx >= s.w) continue;
      const size_t k = s.xi(b, yy, xx, ch);
      if (arg < 0 || x[k] > best) best = x[k], arg = static_cast<int64_t>(k);
    }
  return arg;
}

inline std::vector<double> max_pool2d(const std::vector<double>& x, const PoolShape& s) {
  std::vector<double> y(s.out_size());
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t i = 0; i < s.p(); ++i)
      for (int64_t j = 0; j < s.q(); ++j)
        for (int64_t ch = 0; ch < s.c; ++ch) y[s.yi(b, i, j, ch)] = x[max_pool_argmax(x, s, b, i, j, ch)];
  return y;
}

inline std::vector<double> max_pool2d_backward(const std::vector<double>& dy, const std::vector<double>& x,
                                               const PoolShape& s) {
  std::vector<double> dx(s.in_size(), 0.0);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t i = 0; i < s.p(); ++i)
      for (int64_t j = 0; j < s.q(); ++j)
        for (int64_t ch = 0; ch < s.c; ++ch) dx[max_pool_argmax(x, s, b, i, j, ch)] += dy[s.yi(b, i, j, ch)];
  return dx;
}

inline std::vector<double> avg_pool2d(const std::vector<double>& x, const PoolShape& s) {
  std::vector<double> y(s.out_size());
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t i = 0; i < s.p(); ++i)
      for (int64_t j = 0; j < s.q(); ++j)
        for (int64_t ch = 0; ch < s.c; ++ch) {
          double sum = 0.0;
          for (int64_t r = 0; r < s.kh; ++r)
            for (int64_t t = 0; t < s.kw; ++t) {
              const int64_t yy = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + t;
              if (yy >= 0 && yy < s.h && xx >= 0 && xx < s.w) sum += x[s.xi(b, yy, xx, ch)];
            }
          y[s.yi(b, i, j, ch)] = sum / static_cast<double>(s.kh * s.kw);
        }
  return y;
}

inline std::vector<double> avg_pool2d_backward(const std::vector<double>& dy, const PoolShape& s) {
  std::vector<double> dx(s.in_size(), 0.0);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t i = 0; i < s.p(); ++i)
      for (int64_t j = 0; j < s.q(); ++j)
        for (int64_t ch = 0; ch < s.c; ++ch)
          for (int64_t r = 0; r < s.kh; ++r)
            for (int64_t t = 0; t < s.kw; ++t) {
              const int64_t yy = i * s.sh - s.ph + r, xx = j * s.sw - s.pw + t;
              if (yy >= 0 && yy < s.h && xx >= 0 && xx < s.w)
                dx[s.xi(b, yy, xx, ch)] += dy[s.yi(b, i, j, ch)] / static_cast<double>(s.kh * s.kw);
            }
  return dx;
}

// x [n, hw, c] -> y [n, c].
inline std::vector<double> global_avg_pool(const std::vector<double>& x, int64_t n, int64_t hw, int64_t c) {
  std::vector<double> y(static_cast<size_t>(n * c), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < hw; ++k)
      for (int64_t ch = 0; ch < c; ++ch)
        y[static_cast<size_t>(b * c + ch)] += x[static_cast<size_t>((b * hw + k) * c + ch)];
  for (auto& v : y) v /= static_cast<double>(hw);
  return y;
}

inline std::vector<double> global_avg_pool_backward(const std::vector<double>& dy, int64_t n, int64_t hw,
                                                    int64_t c) {
  std::vector<double> dx(static_cast<size_t>(n * hw * c));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < hw; ++k)
      for (int64_t ch = 0; ch < c; ++ch)
        dx[static_cast<size_t>((b * hw + k) * c + ch)] =
            dy[static_cast<size_t>(b * c + ch)] / static_cast<double>(hw);
  return dx;
}

}  // namespace fresco::ref
