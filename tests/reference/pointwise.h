// Reference SiLU, sigmoid and tanh in double precision, forward and backward. The backward functions take
// what the kernels take: silu the input x, sigmoid and tanh the output y. Used by test_pointwise.cpp (finite
// differences there) and fresco-plugin-check.
#pragma once

#include <cmath>
#include <vector>

namespace fresco::ref {

inline double sigmoid1(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

inline std::vector<double> silu(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sigmoid1(x[i]);
  return y;
}
inline std::vector<double> silu_backward(const std::vector<double>& dy, const std::vector<double>& x) {
  std::vector<double> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double s = sigmoid1(x[i]);
    dx[i] = dy[i] * (s + x[i] * s * (1.0 - s));
  }
  return dx;
}
inline std::vector<double> sigmoid(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = sigmoid1(x[i]);
  return y;
}
inline std::vector<double> sigmoid_backward(const std::vector<double>& dy, const std::vector<double>& y) {
  std::vector<double> dx(y.size());
  for (size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * y[i] * (1.0 - y[i]);
  return dx;
}
inline std::vector<double> tanh(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::tanh(x[i]);
  return y;
}
inline std::vector<double> tanh_backward(const std::vector<double>& dy, const std::vector<double>& y) {
  std::vector<double> dx(y.size());
  for (size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * (1.0 - y[i] * y[i]);
  return dx;
}

}  // namespace fresco::ref
