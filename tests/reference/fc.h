// Reference fully connected layer in double precision: y[M,N] = x[M,K] w[N,K]^T + b (+ relu), and its
// gradients dw = dy^T x, db = column sums of dy, dx = dy w. Plain loops, row-major, PyTorch's (out, in)
// weight layout. Used by tests/plugins/cpu/test_fc.cpp and test_simple_task.cpp; checked there by finite
// differences.
#pragma once

#include <cstdint>
#include <vector>

namespace fresco::ref {

// b may be empty (no bias).
inline std::vector<double> fc_forward(const std::vector<double>& x, const std::vector<double>& w,
                                      const std::vector<double>& b, int64_t m, int64_t k, int64_t n,
                                      bool relu = false) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = b.empty() ? 0.0 : b[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p)
        s += x[static_cast<size_t>(i * k + p)] * w[static_cast<size_t>(j * k + p)];
      y[static_cast<size_t>(i * n + j)] = relu && s < 0.0 ? 0.0 : s;
    }
  return y;
}

// sum over p of |x[i,p] * w[j,p]| + |b[j]|: the scale of the rounding error of one output element.
inline std::vector<double> fc_abs_terms(const std::vector<double>& x, const std::vector<double>& w,
                                        const std::vector<double>& b, int64_t m, int64_t k, int64_t n) {
  std::vector<double> a(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = b.empty() ? 0.0
                           : (b[static_cast<size_t>(j)] < 0 ? -b[static_cast<size_t>(j)]
                                                            : b[static_cast<size_t>(j)]);
      for (int64_t p = 0; p < k; ++p) {
        const double t = x[static_cast<size_t>(i * k + p)] * w[static_cast<size_t>(j * k + p)];
        s += t < 0 ? -t : t;
      }
      a[static_cast<size_t>(i * n + j)] = s;
    }
  return a;
}

struct FcGrads {
  std::vector<double> dw, db, dx;
};

inline FcGrads fc_backward(const std::vector<double>& dy, const std::vector<double>& x,
                           const std::vector<double>& w, int64_t m, int64_t k, int64_t n) {
  FcGrads g;
  g.dw.assign(static_cast<size_t>(n * k), 0.0);
  g.db.assign(static_cast<size_t>(n), 0.0);
  g.dx.assign(static_cast<size_t>(m * k), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double d = dy[static_cast<size_t>(i * n + j)];
      g.db[static_cast<size_t>(j)] += d;
      for (int64_t p = 0; p < k; ++p) {
        g.dw[static_cast<size_t>(j * k + p)] += d * x[static_cast<size_t>(i * k + p)];
        g.dx[static_cast<size_t>(i * k + p)] += d * w[static_cast<size_t>(j * k + p)];
      }
    }
  return g;
}

}  // namespace fresco::ref
