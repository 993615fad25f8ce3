// Conformance of the CPU add, gelu / gelu_backward (exact erf) and flatten_chw / flatten_chw_backward
// kernels: forward and backward against the double references on odd sizes and NHWC maps (N = 1 and 3,
// C = 1, 3, 16), backward against central finite differences of L = sum(y * R), in-place use where allowed,
// bitwise determinism, bad inputs. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/finite_difference.h"
#include "reference/gelu.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;
using fresco::test::to_double;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

std::vector<float> run_gelu(std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size(), kNaN);
  OpCall c(FR_OP_GELU);
  c.in(tensor(x, {n, 1, 1, 1})).out(tensor(y, {n, 1, 1, 1}));
  EXPECT_TRUE(c.run());
  return y;
}

std::vector<float> run_gelu_backward(std::vector<float>& dy, std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> dx(x.size(), kNaN);
  OpCall c(FR_OP_GELU_BACKWARD);
  c.in(tensor(dy, {n, 1, 1, 1})).in(tensor(x, {n, 1, 1, 1})).out(tensor(dx, {n, 1, 1, 1}));
  EXPECT_TRUE(c.run());
  return dx;
}

TEST(CpuAdd, MatchesReferenceAndRunsInPlace) {
  std::mt19937 rng(41);
  for (int64_t n : {1, 3, 37, 32768 + 5, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> a = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
    std::vector<float> b = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
    std::vector<float> y(a.size(), kNaN);
    OpCall c(FR_OP_ADD);
    c.in(tensor(a, {n, 1, 1, 1})).in(tensor(b, {n, 1, 1, 1})).out(tensor(y, {n, 1, 1, 1}));
    ASSERT_TRUE(c.run());
    std::vector<float> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i];  // exactly one float rounding
    EXPECT_TRUE(fresco::test::bitwise_equal(y, want));
    EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::add(to_double(a), to_double(b)), 1e-7, 1e-7));
    OpCall in_place(FR_OP_ADD);  // y over a (gradient sums accumulate in place)
    in_place.in(tensor(a, {n, 1, 1, 1})).in(tensor(b, {n, 1, 1, 1})).out(tensor(a, {n, 1, 1, 1}));
    ASSERT_TRUE(in_place.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(a, want));
  }
}

TEST(CpuAddRelu, IsMaxOfTheSumAndZeroInPlaceToo) {
  std::mt19937 rng(43);
  const int64_t n = 100003;
  std::vector<float> a = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
  std::vector<float> b = fresco::test::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f);
  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) want[i] = a[i] + b[i] > 0.0f ? a[i] + b[i] : 0.0f;
  OpCall c(FR_OP_ADD_RELU);  // in place over a, as a residual join writes its output
  c.in(tensor(a, {n, 1, 1, 1})).in(tensor(b, {n, 1, 1, 1})).out(tensor(a, {n, 1, 1, 1}));
  ASSERT_TRUE(c.run());
  EXPECT_TRUE(fresco::test::bitwise_equal(a, want));
  std::vector<float> y(8), z(9);
  OpCall bad(FR_OP_ADD_RELU);
  bad.in(tensor(y, {8, 1, 1, 1})).in(tensor(z, {9, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "sizes differ")) << bad.run_error();
}

// add_relu_backward equals add followed by relu_backward on the same y (bit for bit in f32), in place too.
TEST(CpuAddReluBackward, EqualsTheSumThenTheMask) {
  const int64_t n = 2049;
  std::mt19937 rng(45);
  std::vector<float> a = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
  std::vector<float> b = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
  std::vector<float> y = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
  for (int64_t i = 0; i < n; i += 7)  // a gradient that is not finite where the relu was off: masked to 0
    if (y[i] <= 0.0f) a[i] = i % 2 ? INFINITY : std::numeric_limits<float>::quiet_NaN();
  std::vector<float> sum(n), want(n);
  OpCall add(FR_OP_ADD);
  add.in(tensor(a, {n, 1, 1, 1})).in(tensor(b, {n, 1, 1, 1})).out(tensor(sum, {n, 1, 1, 1}));
  ASSERT_TRUE(add.run());
  OpCall mask(FR_OP_RELU_BACKWARD);
  mask.in(tensor(sum, {n, 1, 1, 1})).in(tensor(y, {n, 1, 1, 1})).out(tensor(want, {n, 1, 1, 1}));
  ASSERT_TRUE(mask.run());
  OpCall c(FR_OP_ADD_RELU_BACKWARD);  // in place over a
  c.in(tensor(a, {n, 1, 1, 1}))
      .in(tensor(b, {n, 1, 1, 1}))
      .in(tensor(y, {n, 1, 1, 1}))
      .out(tensor(a, {n, 1, 1, 1}));
  ASSERT_TRUE(c.run());
  EXPECT_TRUE(fresco::test::bitwise_equal(a, want));
  for (float v : a) EXPECT_TRUE(std::isfinite(v));
  std::vector<float> p(8), q(8), r(9);
  OpCall bad(FR_OP_ADD_RELU_BACKWARD);
  bad.in(tensor(p, {8, 1, 1, 1}))
      .in(tensor(q, {8, 1, 1, 1}))
      .in(tensor(r, {9, 1, 1, 1}))
      .out(tensor(p, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "sizes differ")) << bad.run_error();
}

// A compact second part (ops.h, FrAddReluBackwardParams): b adds at the strided positions of a [2, 5, 4, 3]
// map (rows 0, 2, 4; columns 0, 2), + 0 elsewhere (a -0 comes out +0 as with the full-size part's zeros); a b
// of another shape is refused with the shape it must have.
TEST(CpuAddReluBackward, ACompactPartAddsAtTheStridedPositions) {
  const int64_t n = 2, h = 5, w = 4, c = 3, p = 3, q = 2, total = n * h * w * c;
  std::mt19937 rng(46);
  std::vector<float> a = fresco::test::random_floats(rng, total, -1.0f, 1.0f);
  std::vector<float> y = fresco::test::random_floats(rng, total, -1.0f, 1.0f);
  std::vector<float> b = fresco::test::random_floats(rng, n * p * q * c, -1.0f, 1.0f);
  a[c] = -0.0f, y[c] = 1.0f;  // position (0, 0, 1): no part there
  std::vector<float> full(total, 0.0f), want(total), got(total);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < p; ++r)
      for (int64_t s = 0; s < q; ++s)
        for (int64_t k = 0; k < c; ++k)
          full[((i * h + 2 * r) * w + 2 * s) * c + k] = b[((i * p + r) * q + s) * c + k];
  OpCall plain(FR_OP_ADD_RELU_BACKWARD);
  plain.in(tensor(a, {n, h, w, c})).in(tensor(full, {n, h, w, c})).in(tensor(y, {n, h, w, c}));
  plain.out(tensor(want, {n, h, w, c}));
  ASSERT_TRUE(plain.run());
  OpCall compact(FR_OP_ADD_RELU_BACKWARD);
  compact.in(tensor(a, {n, h, w, c})).in(tensor(b, {n, p, q, c})).in(tensor(y, {n, h, w, c}));
  compact.out(tensor(got, {n, h, w, c})).params(FrAddReluBackwardParams{2, 2});
  ASSERT_TRUE(compact.run());
  EXPECT_TRUE(fresco::test::bitwise_equal(got, want));
  EXPECT_FALSE(std::signbit(got[c]));
  OpCall bad(FR_OP_ADD_RELU_BACKWARD);
  bad.in(tensor(a, {n, h, w, c})).in(tensor(b, {n, q, p, c})).in(tensor(y, {n, h, w, c}));
  bad.out(tensor(got, {n, h, w, c})).params(FrAddReluBackwardParams{2, 2});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "must be [2,3,2,3]")) << bad.run_error();
}

// concat joins channels (a's first) and concat_backward splits them back, exactly; mismatched maps are
// errors.
TEST(CpuConcat, JoinsAndSplitsChannels) {
  const int64_t n = 2, h = 3, w = 4, ca = 5, cb = 3;
  std::mt19937 rng(44);
  std::vector<float> a = fresco::test::random_floats(rng, static_cast<size_t>(n * h * w * ca), -1.0f, 1.0f);
  std::vector<float> b = fresco::test::random_floats(rng, static_cast<size_t>(n * h * w * cb), -1.0f, 1.0f);
  std::vector<float> y(static_cast<size_t>(n * h * w * (ca + cb)), kNaN);
  OpCall c(FR_OP_CONCAT);
  c.in(tensor(a, {n, h, w, ca})).in(tensor(b, {n, h, w, cb})).out(tensor(y, {n, h, w, ca + cb}));
  ASSERT_TRUE(c.run());
  for (int64_t r = 0; r < n * h * w; ++r) {
    for (int64_t k = 0; k < ca; ++k) ASSERT_EQ(y[r * (ca + cb) + k], a[r * ca + k]);
    for (int64_t k = 0; k < cb; ++k) ASSERT_EQ(y[r * (ca + cb) + ca + k], b[r * cb + k]);
  }
  std::vector<float> da(a.size(), kNaN), db(b.size(), kNaN);
  OpCall s(FR_OP_CONCAT_BACKWARD);
  s.in(tensor(y, {n, h, w, ca + cb})).out(tensor(da, {n, h, w, ca})).out(tensor(db, {n, h, w, cb}));
  ASSERT_TRUE(s.run());
  EXPECT_EQ(da, a);
  EXPECT_EQ(db, b);
  std::vector<float> small(static_cast<size_t>(n * h * 2 * cb));
  OpCall bad(FR_OP_CONCAT);
  bad.in(tensor(a, {n, h, w, ca})).in(tensor(small, {n, h, 2, cb})).out(tensor(y, {n, h, w, ca + cb}));
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "differ in N, H or W")) << bad.run_error();
}

TEST(CpuAdd, BadInputsReturnErrors) {
  std::vector<float> a(8), b(9), y(8);
  OpCall c(FR_OP_ADD);
  c.in(tensor(a, {8, 1, 1, 1})).in(tensor(b, {9, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  OpCall d(FR_OP_ADD);
  d.in(tensor(a, {8, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(d.run_error(), "expected at least")) << d.run_error();
}

TEST(CpuGelu, ForwardAndBackwardMatchReference) {
  std::mt19937 rng(42);
  for (int64_t n : {1, 3, 37, 16384 + 3, 100003}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -6.0f, 6.0f);
    x[0] = 0.0f;
    std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
    const std::vector<float> y = run_gelu(x);
    EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::gelu(to_double(x)), 2e-6, 1e-7));
    const std::vector<float> dx = run_gelu_backward(dy, x);
    EXPECT_TRUE(
        fresco::test::all_close(dx, fresco::ref::gelu_backward(to_double(dy), to_double(x)), 2e-6, 1e-7));
  }
  // Known values: gelu(1) = 0.841344746..., gelu(-1) = -0.158655253..., gelu'(0) = 0.5.
  std::vector<float> x = {1.0f, -1.0f, 0.0f}, ones = {1.0f, 1.0f, 1.0f};
  const std::vector<float> y = run_gelu(x);
  EXPECT_NEAR(y[0], 0.8413447460685429, 1e-7);
  EXPECT_NEAR(y[1], -0.15865525393145707, 1e-7);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_NEAR(run_gelu_backward(ones, x)[2], 0.5, 1e-7);
}

TEST(CpuGelu, BackwardFiniteDifferencesAndInPlace) {
  std::mt19937 rng(43);
  for (int64_t n : {1, 3, 37, 513}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -4.0f, 4.0f);
    std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
    if (n == 1) x[0] = 0.7f;
    const std::vector<float> dx = run_gelu_backward(r, x);
    std::vector<double> xd = to_double(x);
    const std::vector<double> rd = to_double(r);
    auto loss = [&](const std::vector<double>& p) { return dot(fresco::ref::gelu(p), rd); };
    const auto idx = fresco::ref::check_indices(xd.size(), 600);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-4)));
    // dx over dy.
    OpCall c(FR_OP_GELU_BACKWARD);
    c.in(tensor(r, {n, 1, 1, 1})).in(tensor(x, {n, 1, 1, 1})).out(tensor(r, {n, 1, 1, 1}));
    ASSERT_TRUE(c.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(r, dx));
  }
}

TEST(CpuGelu, DeterministicAndBadInputs) {
  std::mt19937 rng(44);
  std::vector<float> x = fresco::test::random_floats(rng, 70001, -5.0f, 5.0f);
  EXPECT_TRUE(fresco::test::bitwise_equal(run_gelu(x), run_gelu(x)));
  std::vector<float> a(8), b(9), y(8);
  OpCall c(FR_OP_GELU);
  c.in(tensor(a, {8, 1, 1, 1})).out(tensor(b, {9, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  OpCall d(FR_OP_GELU_BACKWARD);
  d.in(tensor(a, {8, 1, 1, 1})).in(tensor(b, {9, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(d.run_error(), "sizes differ")) << d.run_error();
  OpCall e(FR_OP_GELU_BACKWARD);
  e.in(tensor(a, {8, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(e.run_error(), "expected at least")) << e.run_error();
}

TEST(CpuFlatten, ForwardBackwardMatchReference) {
  const int64_t shapes[][4] = {{1, 5, 7, 3}, {3, 4, 5, 16}, {3, 3, 3, 1}, {1, 1, 1, 16}, {3, 37, 33, 40}};
  std::mt19937 rng(45);
  for (const auto& d : shapes) {
    const int64_t n = d[0], h = d[1], w = d[2], c = d[3];
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" +
                 std::to_string(c));
    const auto size = static_cast<size_t>(n * h * w * c);
    std::vector<float> x = fresco::test::random_floats(rng, size, -1.0f, 1.0f);
    std::vector<float> y(size, kNaN), dx(size, kNaN);
    OpCall f(FR_OP_FLATTEN_CHW);
    f.in(tensor(x, {n, h, w, c})).out(tensor(y, {n, 1, 1, c * h * w}));
    ASSERT_TRUE(f.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(y, fresco::ref::flatten_chw(x, n, h, w, c)));
    std::vector<float> dy = fresco::test::random_floats(rng, size, -1.0f, 1.0f);
    OpCall b(FR_OP_FLATTEN_CHW_BACKWARD);
    b.in(tensor(dy, {n, 1, 1, c * h * w})).out(tensor(dx, {n, h, w, c}));
    ASSERT_TRUE(b.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(dx, fresco::ref::flatten_chw_backward(dy, n, h, w, c)));
    // Round trip.
    OpCall back(FR_OP_FLATTEN_CHW_BACKWARD);
    back.in(tensor(y, {n, 1, 1, c * h * w})).out(tensor(dx, {n, h, w, c}));
    ASSERT_TRUE(back.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(dx, x));
  }
}

TEST(CpuFlatten, BackwardFiniteDifferences) {
  const int64_t n = 3, h = 3, w = 5, c = 3;
  const auto size = static_cast<size_t>(n * h * w * c);
  std::mt19937 rng(46);
  std::vector<float> r = fresco::test::random_floats(rng, size, -1.0f, 1.0f);
  std::vector<float> dx(size, kNaN);
  OpCall b(FR_OP_FLATTEN_CHW_BACKWARD);
  b.in(tensor(r, {n, 1, 1, c * h * w})).out(tensor(dx, {n, h, w, c}));
  ASSERT_TRUE(b.run());
  std::vector<double> xd = to_double(fresco::test::random_floats(rng, size, -1.0f, 1.0f));
  const std::vector<double> rd = to_double(r);
  auto loss = [&](const std::vector<double>& p) { return dot(fresco::ref::flatten_chw(p, n, h, w, c), rd); };
  const auto idx = fresco::ref::check_indices(size, 200);
  EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-3)));
}

TEST(CpuFlatten, BadInputsReturnErrors) {
  std::vector<float> x(2 * 3 * 3 * 4), y(2 * 3 * 3 * 4), y_small(2 * 35);
  {
    OpCall c(FR_OP_FLATTEN_CHW);  // wrong element count
    c.in(tensor(x, {2, 3, 3, 4})).out(tensor(y_small, {2, 1, 1, 35}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "[N, C*H*W]")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FLATTEN_CHW);  // batch mismatch
    c.in(tensor(x, {2, 3, 3, 4})).out(tensor(y, {1, 1, 1, 72}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "[N, C*H*W]")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FLATTEN_CHW);  // in place is not a transpose
    c.in(tensor(x, {2, 3, 3, 4})).out(tensor(x, {2, 1, 1, 36}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "alias")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FLATTEN_CHW_BACKWARD);  // dx not 4-D
    c.in(tensor(y, {2, 1, 1, 36})).out(tensor(x, {2, 36}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "4-D")) << c.run_error();
  }
}

}  // namespace
