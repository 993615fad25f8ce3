// Reference activations in double precision: relu y = max(x, 0) and its backward dx = dy * [y > 0]
// (PyTorch's convention: the gradient at exactly 0 is 0). Used by test_activations.cpp and
// test_simple_task.cpp.
#pragma once

#include <vector>

namespace fresco::ref {

inline std::vector<double> relu(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0.0 ? x[i] : 0.0;
  return y;
}

inline std::vector<double> relu_backward(const std::vector<double>& dy, const std::vector<double>& y) {
  std::vector<double> dx(dy.size());
  for (size_t i = 0; i < dy.size(); ++i) dx[i] = y[i] > 0.0 ? dy[i] : 0.0;
  return dx;
}

}  // namespace fresco::ref
