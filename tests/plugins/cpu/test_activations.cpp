// Conformance of the CPU relu and relu_backward kernels: forward equals max(x, 0) exactly (odd sizes, sizes
// past the parallel grain, NHWC maps); backward equals dy * [y > 0] exactly and matches central finite
// differences of L = sum(relu(x) * R) with |x| kept away from the kink; in-place use (dx over dy) works; bad
// arity/sizes return errors. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/activations.h"
#include "reference/finite_difference.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> run_relu(std::vector<float>& x, std::initializer_list<int64_t> dims) {
  std::vector<float> y(x.size(), kNaN);
  OpCall c(FR_OP_RELU);
  c.in(tensor(x, dims)).out(tensor(y, dims));
  EXPECT_TRUE(c.run());
  return y;
}

std::vector<float> run_relu_backward(std::vector<float>& dy, std::vector<float>& y) {
  const auto n = static_cast<int64_t>(dy.size());
  std::vector<float> dx(dy.size(), kNaN);
  OpCall c(FR_OP_RELU_BACKWARD);
  c.in(tensor(dy, {n, 1, 1, 1})).in(tensor(y, {n, 1, 1, 1})).out(tensor(dx, {n, 1, 1, 1}));
  EXPECT_TRUE(c.run());
  return dx;
}

TEST(CpuRelu, ForwardMatchesReference) {
  const int64_t sizes[] = {1, 3, 37, 1000, 32768 + 5, 100003};
  std::mt19937 rng(11);
  for (int64_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
    x[0] = 0.0f;
    if (n > 1) x[1] = -0.0f;
    const std::vector<float> y = run_relu(x, {n, 1, 1, 1});
    EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::relu(fresco::test::to_double(x)), 0.0, 0.0));
  }
}

TEST(CpuRelu, ForwardOnNhwcMap) {
  std::mt19937 rng(12);
  std::vector<float> x = fresco::test::random_floats(rng, 3 * 5 * 7 * 3, -1.0f, 1.0f);
  const std::vector<float> y = run_relu(x, {3, 5, 7, 3});
  EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::relu(fresco::test::to_double(x)), 0.0, 0.0));
}

TEST(CpuRelu, BackwardMatchesReference) {
  const int64_t sizes[] = {1, 3, 37, 32768 + 5, 100003};
  std::mt19937 rng(13);
  for (int64_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
    std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
    std::vector<float> y = run_relu(x, {n, 1, 1, 1});
    const std::vector<float> dx = run_relu_backward(dy, y);
    EXPECT_TRUE(fresco::test::all_close(
        dx, fresco::ref::relu_backward(fresco::test::to_double(dy), fresco::test::to_double(y)), 0.0, 0.0));
  }
}

TEST(CpuRelu, BackwardFiniteDifferences) {
  // L(x) = sum(relu(x) * R): dL/dx = R * [x > 0], checked numerically away from the kink (|x| >= 0.05).
  const int64_t sizes[] = {1, 3, 37, 513};
  std::mt19937 rng(14);
  for (int64_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_away_from_zero(rng, static_cast<size_t>(n), 0.05f, 2.0f);
    if (n == 1) x[0] = 0.7f;  // one live element, so the gradient is not identically zero
    std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
    std::vector<float> y = run_relu(x, {n, 1, 1, 1});
    const std::vector<float> dx = run_relu_backward(r, y);
    std::vector<double> xd = fresco::test::to_double(x);
    const std::vector<double> rd = fresco::test::to_double(r);
    auto loss = [&](const std::vector<double>& p) {
      const std::vector<double> yy = fresco::ref::relu(p);
      double l = 0.0;
      for (size_t i = 0; i < yy.size(); ++i) l += yy[i] * rd[i];
      return l;
    };
    const auto idx = fresco::ref::check_indices(xd.size(), 600);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-3)));
  }
}

TEST(CpuRelu, BackwardInPlace) {
  // dx may alias dy (the runtime reuses gradient slots).
  std::mt19937 rng(15);
  std::vector<float> x = fresco::test::random_floats(rng, 1001, -1.0f, 1.0f);
  std::vector<float> g = fresco::test::random_floats(rng, 1001, -1.0f, 1.0f);
  const std::vector<double> expected =
      fresco::ref::relu_backward(fresco::test::to_double(g), fresco::ref::relu(fresco::test::to_double(x)));
  std::vector<float> y = run_relu(x, {1001, 1, 1, 1});
  OpCall c(FR_OP_RELU_BACKWARD);
  c.in(tensor(g, {1001, 1, 1, 1})).in(tensor(y, {1001, 1, 1, 1})).out(tensor(g, {1001, 1, 1, 1}));
  ASSERT_TRUE(c.run());
  EXPECT_TRUE(fresco::test::all_close(g, expected, 0.0, 0.0));
}

TEST(CpuRelu, BackwardMasksGradientsThatAreNotFinite) {
  // PyTorch's threshold_backward selects: where y <= 0 (or y is NaN) dx is +0 whatever dy holds.
  std::vector<float> y = {1.0f, 0.0f, -1.0f, kNaN, 2.0f, -0.0f, 0.0f, 3.0f, -2.0f, 1e-30f};
  std::vector<float> dy = {INFINITY, INFINITY, kNaN, kNaN, -1.5f, -INFINITY, -2.0f, kNaN, 4.0f, 0.25f};
  const std::vector<float> dx = run_relu_backward(dy, y);
  for (size_t i = 0; i < y.size(); ++i) {
    SCOPED_TRACE(i);
    if (y[i] > 0.0f)
      EXPECT_TRUE(dx[i] == dy[i] || (std::isnan(dx[i]) && std::isnan(dy[i])));
    else
      EXPECT_TRUE(dx[i] == 0.0f && !std::signbit(dx[i]));
  }
}

TEST(CpuRelu, BadInputsReturnErrors) {
  std::vector<float> a(8), b(8), c8(8), c9(9);
  {
    OpCall c(FR_OP_RELU);  // no output
    c.in(tensor(a, {8, 1, 1, 1}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_RELU);  // sizes differ
    c.in(tensor(a, {8, 1, 1, 1})).out(tensor(c9, {9, 1, 1, 1}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  }
  {
    OpCall c(FR_OP_RELU_BACKWARD);  // y missing
    c.in(tensor(a, {8, 1, 1, 1})).out(tensor(c8, {8, 1, 1, 1}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_RELU_BACKWARD);  // dx of another size
    c.in(tensor(a, {8, 1, 1, 1})).in(tensor(b, {8, 1, 1, 1})).out(tensor(c9, {9, 1, 1, 1}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  }
}

}  // namespace
