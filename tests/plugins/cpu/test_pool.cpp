// Conformance of the CPU pooling kernels (NHWC): max_pool2d / avg_pool2d / global_avg_pool forward and
// backward against the double references on odd shapes, padding, strides and overlapping windows; backward
// against central finite differences of L = sum(y * R) (max pool with distinct inputs, so no ties); the
// tie rule (first maximum) and padding never winning; bitwise determinism; bad inputs. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/finite_difference.h"
#include "reference/pool.h"

namespace {

using fresco::ref::PoolShape;
using fresco::test::OpCall;
using fresco::test::tensor;
using fresco::test::to_double;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// n, h, w, c, kh, kw, sh, sw, ph, pw
const PoolShape kShapes[] = {
    {1, 5, 7, 3, 2, 2, 2, 2, 0, 0},    {3, 9, 8, 16, 3, 3, 2, 2, 1, 1}, {3, 6, 5, 1, 3, 2, 1, 2, 1, 0},
    {1, 4, 4, 3, 4, 4, 4, 4, 0, 0},    {2, 7, 7, 3, 3, 3, 1, 1, 1, 1},  {3, 11, 13, 20, 3, 3, 2, 2, 1, 1},
    {1, 17, 15, 16, 5, 3, 3, 2, 2, 1},
};

std::string name(const PoolShape& s) {
  return std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + "x" +
         std::to_string(s.c) + " k" + std::to_string(s.kh) + "x" + std::to_string(s.kw) + " s" +
         std::to_string(s.sh) + "x" + std::to_string(s.sw) + " p" + std::to_string(s.ph) + "x" +
         std::to_string(s.pw);
}

FrPoolParams params(const PoolShape& s) {
  return FrPoolParams{static_cast<int32_t>(s.kh), static_cast<int32_t>(s.kw), static_cast<int32_t>(s.sh),
                      static_cast<int32_t>(s.sw), static_cast<int32_t>(s.ph), static_cast<int32_t>(s.pw)};
}

// Distinct values (a shuffled grid, spacing 0.01) so max pooling has no ties and finite differences with
// h = 1e-3 never change the argmax.
std::vector<float> distinct(std::mt19937& rng, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.01f - static_cast<float>(n) * 0.005f;
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

std::vector<float> run_fwd(const char* op, std::vector<float>& x, const PoolShape& s) {
  std::vector<float> y(s.out_size(), kNaN);
  OpCall c(op);
  c.in(tensor(x, {s.n, s.h, s.w, s.c})).out(tensor(y, {s.n, s.p(), s.q(), s.c})).params(params(s));
  EXPECT_TRUE(c.run());
  return y;
}

std::vector<float> run_max_bwd(std::vector<float>& dy, std::vector<float>& x, std::vector<float>& y,
                               const PoolShape& s) {
  std::vector<float> dx(s.in_size(), kNaN);
  OpCall c(FR_OP_MAX_POOL2D_BACKWARD);
  c.in(tensor(dy, {s.n, s.p(), s.q(), s.c}))
      .in(tensor(x, {s.n, s.h, s.w, s.c}))
      .in(tensor(y, {s.n, s.p(), s.q(), s.c}))
      .out(tensor(dx, {s.n, s.h, s.w, s.c}))
      .params(params(s));
  EXPECT_TRUE(c.run());
  return dx;
}

std::vector<float> run_avg_bwd(std::vector<float>& dy, const PoolShape& s) {
  std::vector<float> dx(s.in_size(), kNaN);
  OpCall c(FR_OP_AVG_POOL2D_BACKWARD);
  c.in(tensor(dy, {s.n, s.p(), s.q(), s.c})).out(tensor(dx, {s.n, s.h, s.w, s.c})).params(params(s));
  EXPECT_TRUE(c.run());
  return dx;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

TEST(CpuPool, MaxForwardAndBackwardMatchReference) {
  std::mt19937 rng(31);
  for (const PoolShape& s : kShapes) {
    SCOPED_TRACE(name(s));
    std::vector<float> x = distinct(rng, s.in_size());
    std::vector<float> y = run_fwd(FR_OP_MAX_POOL2D, x, s);
    EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::max_pool2d(to_double(x), s), 0.0, 0.0));
    std::vector<float> dy = fresco::test::random_floats(rng, s.out_size(), -1.0f, 1.0f);
    const std::vector<float> dx = run_max_bwd(dy, x, y, s);
    EXPECT_TRUE(fresco::test::all_close(dx, fresco::ref::max_pool2d_backward(to_double(dy), to_double(x), s),
                                        1e-6, 1e-6));
  }
}

TEST(CpuPool, MaxTiesGoToFirstAndPaddingNeverWins) {
  // All equal: every window's gradient goes to its first (top-left) element.
  const PoolShape s{1, 4, 4, 2, 2, 2, 2, 2, 0, 0};
  std::vector<float> x(s.in_size(), 0.0f), dy(s.out_size(), 1.0f);
  std::vector<float> y = run_fwd(FR_OP_MAX_POOL2D, x, s);
  const std::vector<float> dx = run_max_bwd(dy, x, y, s);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t ch = 0; ch < 2; ++ch)
        EXPECT_EQ(dx[s.xi(0, i, j, ch)], (i % 2 == 0 && j % 2 == 0) ? 1.0f : 0.0f) << i << "," << j;
  // Negative inputs with padding: the zero padding never wins.
  const PoolShape sp{1, 3, 3, 1, 3, 3, 1, 1, 1, 1};
  std::vector<float> xn = {-9, -8, -7, -6, -5, -4, -3, -2, -1};
  const std::vector<float> yn = run_fwd(FR_OP_MAX_POOL2D, xn, sp);
  EXPECT_TRUE(fresco::test::all_close(yn, std::vector<double>{-5, -4, -4, -2, -1, -1, -2, -1, -1}, 0.0, 0.0));
}

TEST(CpuPool, MaxBackwardFiniteDifferences) {
  std::mt19937 rng(32);
  for (const PoolShape& s : {kShapes[0], kShapes[2], kShapes[4]}) {
    SCOPED_TRACE(name(s));
    std::vector<float> x = distinct(rng, s.in_size());
    std::vector<float> r = fresco::test::random_floats(rng, s.out_size(), -1.0f, 1.0f);
    std::vector<float> y = run_fwd(FR_OP_MAX_POOL2D, x, s);
    const std::vector<float> dx = run_max_bwd(r, x, y, s);
    std::vector<double> xd = to_double(x);
    const std::vector<double> rd = to_double(r);
    auto loss = [&](const std::vector<double>& p) { return dot(fresco::ref::max_pool2d(p, s), rd); };
    const auto idx = fresco::ref::check_indices(xd.size(), 400);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-3)));
  }
}

TEST(CpuPool, AvgForwardAndBackwardMatchReference) {
  std::mt19937 rng(33);
  for (const PoolShape& s : kShapes) {
    SCOPED_TRACE(name(s));
    std::vector<float> x = fresco::test::random_floats(rng, s.in_size(), -1.0f, 1.0f);
    const std::vector<float> y = run_fwd(FR_OP_AVG_POOL2D, x, s);
    EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::avg_pool2d(to_double(x), s), 1e-6, 1e-6));
    std::vector<float> dy = fresco::test::random_floats(rng, s.out_size(), -1.0f, 1.0f);
    const std::vector<float> dx = run_avg_bwd(dy, s);
    EXPECT_TRUE(fresco::test::all_close(dx, fresco::ref::avg_pool2d_backward(to_double(dy), s), 1e-6, 1e-6));
  }
}

TEST(CpuPool, AvgBackwardFiniteDifferences) {
  std::mt19937 rng(34);
  for (const PoolShape& s : {kShapes[1], kShapes[2], kShapes[4]}) {
    SCOPED_TRACE(name(s));
    std::vector<float> r = fresco::test::random_floats(rng, s.out_size(), -1.0f, 1.0f);
    const std::vector<float> dx = run_avg_bwd(r, s);
    std::vector<double> xd = to_double(fresco::test::random_floats(rng, s.in_size(), -1.0f, 1.0f));
    const std::vector<double> rd = to_double(r);
    auto loss = [&](const std::vector<double>& p) { return dot(fresco::ref::avg_pool2d(p, s), rd); };
    const auto idx = fresco::ref::check_indices(xd.size(), 400);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-3)));
  }
}

TEST(CpuPool, GlobalAvgMatchesReferenceAndFiniteDifferences) {
  std::mt19937 rng(35);
  const int64_t shapes[][4] = {{1, 5, 7, 3}, {3, 4, 4, 16}, {3, 3, 5, 1}, {2, 1, 1, 3}, {3, 9, 9, 100}};
  for (const auto& d : shapes) {
    const int64_t n = d[0], h = d[1], w = d[2], c = d[3];
    SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" +
                 std::to_string(c));
    const auto size = static_cast<size_t>(n * h * w * c);
    std::vector<float> x = fresco::test::random_floats(rng, size, -1.0f, 1.0f);
    std::vector<float> y(static_cast<size_t>(n * c), kNaN);
    OpCall f(FR_OP_GLOBAL_AVG_POOL);
    f.in(tensor(x, {n, h, w, c})).out(tensor(y, {n, 1, 1, c}));
    ASSERT_TRUE(f.run());
    EXPECT_TRUE(
        fresco::test::all_close(y, fresco::ref::global_avg_pool(to_double(x), n, h * w, c), 1e-6, 1e-7));
    std::vector<float> r = fresco::test::random_floats(rng, y.size(), -1.0f, 1.0f);
    std::vector<float> dx(size, kNaN);
    OpCall b(FR_OP_GLOBAL_AVG_POOL_BACKWARD);
    b.in(tensor(r, {n, 1, 1, c})).out(tensor(dx, {n, h, w, c}));
    ASSERT_TRUE(b.run());
    const std::vector<double> rd = to_double(r);
    EXPECT_TRUE(
        fresco::test::all_close(dx, fresco::ref::global_avg_pool_backward(rd, n, h * w, c), 1e-6, 0.0));
    std::vector<double> xd = to_double(x);
    auto loss = [&](const std::vector<double>& p) {
      return dot(fresco::ref::global_avg_pool(p, n, h * w, c), rd);
    };
    const auto idx = fresco::ref::check_indices(xd.size(), 200);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-3)));
  }
}

TEST(CpuPool, Deterministic) {
  std::mt19937 rng(36);
  const PoolShape s{3, 31, 29, 40, 3, 3, 1, 1, 1, 1};  // overlapping windows: accumulation order matters
  std::vector<float> x = fresco::test::random_floats(rng, s.in_size(), -1.0f, 1.0f);
  std::vector<float> dy = fresco::test::random_floats(rng, s.out_size(), -1.0f, 1.0f);
  for (const char* op : {FR_OP_MAX_POOL2D, FR_OP_AVG_POOL2D}) {
    std::vector<float> a = run_fwd(op, x, s), b = run_fwd(op, x, s);
    EXPECT_TRUE(fresco::test::bitwise_equal(a, b)) << op;
  }
  std::vector<float> y = run_fwd(FR_OP_MAX_POOL2D, x, s);
  EXPECT_TRUE(fresco::test::bitwise_equal(run_max_bwd(dy, x, y, s), run_max_bwd(dy, x, y, s)));
  EXPECT_TRUE(fresco::test::bitwise_equal(run_avg_bwd(dy, s), run_avg_bwd(dy, s)));
}

TEST(CpuPool, BadInputsReturnErrors) {
  const PoolShape s{2, 5, 5, 3, 2, 2, 2, 2, 0, 0};  // P = Q = 2
  std::vector<float> x(s.in_size()), y(s.out_size()), y_big(2 * 3 * 3 * 3), dx(s.in_size());
  const FrPoolParams p = params(s);
  {
    OpCall c(FR_OP_MAX_POOL2D);
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y, {2, 2, 2, 3})).params(p);
    EXPECT_EQ(c.run_error(), "");
  }
  {
    OpCall c(FR_OP_MAX_POOL2D);  // params of the wrong size
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y, {2, 2, 2, 3})).raw_params(&p, sizeof p - 4);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_AVG_POOL2D);  // output of the wrong shape
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y_big, {2, 3, 3, 3})).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "output shape")) << c.run_error();
  }
  {
    OpCall c(FR_OP_MAX_POOL2D);  // padding over half the kernel
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y_big, {2, 3, 3, 3})).params(FrPoolParams{2, 2, 2, 2, 2, 2});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "padding")) << c.run_error();
  }
  {
    OpCall c(FR_OP_MAX_POOL2D);  // zero stride
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y, {2, 2, 2, 3})).params(FrPoolParams{2, 2, 0, 2, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "stride")) << c.run_error();
  }
  {
    OpCall c(FR_OP_MAX_POOL2D_BACKWARD);  // y missing
    c.in(tensor(y, {2, 2, 2, 3})).in(tensor(x, {2, 5, 5, 3})).out(tensor(dx, {2, 5, 5, 3})).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_MAX_POOL2D_BACKWARD);  // dx of another shape than x
    c.in(tensor(y, {2, 2, 2, 3})).in(tensor(x, {2, 5, 5, 3})).in(tensor(y, {2, 2, 2, 3}));
    c.out(tensor(dx, {2, 5, 3, 5})).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "shapes differ")) << c.run_error();
  }
  {
    OpCall c(FR_OP_AVG_POOL2D_BACKWARD);  // dy of the wrong shape for dx
    c.in(tensor(y_big, {2, 3, 3, 3})).out(tensor(dx, {2, 5, 5, 3})).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "output shape")) << c.run_error();
  }
  {
    OpCall c(FR_OP_GLOBAL_AVG_POOL);  // y not [N,1,1,C]
    c.in(tensor(x, {2, 5, 5, 3})).out(tensor(y, {2, 2, 2, 3}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "[N,1,1,C]")) << c.run_error();
  }
  {
    OpCall c(FR_OP_GLOBAL_AVG_POOL_BACKWARD);  // dy not [N,1,1,C]
    c.in(tensor(y, {2, 2, 2, 3})).out(tensor(dx, {2, 5, 5, 3}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "[N,1,1,C]")) << c.run_error();
  }
}

}  // namespace
