// Conformance of the CPU fc and fc_backward kernels: forward (with/without bias, fused relu, NHWC input)
// against the double reference within the rigorous float bound (L + 2) * eps * sum |terms|; backward (bias,
// need_dx 0/1) against the reference and against central finite differences of L = sum(y * R); outputs start
// as NaN, so every element must be written; bad params/arity/shapes return errors. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/fc.h"
#include "reference/finite_difference.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape3 {
  int64_t m, k, n;
};
std::string str(const Shape3& s) {
  return "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n);
}

// Random operands of one fc problem (floats, as the kernel sees them).
struct FcData {
  Shape3 s;
  std::vector<float> x, w, b;
  FcData(const Shape3& shape, uint32_t seed) : s(shape) {
    std::mt19937 rng(seed);
    x = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.k), -1.0f, 1.0f);
    w = fresco::test::random_floats(rng, static_cast<size_t>(s.n * s.k), -0.5f, 0.5f);
    b = fresco::test::random_floats(rng, static_cast<size_t>(s.n), -1.0f, 1.0f);
  }
};

using fresco::test::abs_of;
using fresco::test::float_bound;

std::vector<float> run_fc(FcData& d, bool bias, bool relu) {
  std::vector<float> y(static_cast<size_t>(d.s.m * d.s.n), kNaN);
  OpCall c(FR_OP_FC);
  c.in(tensor(d.x, {d.s.m, 1, 1, d.s.k})).in(tensor(d.w, {d.s.n, 1, 1, d.s.k}));
  if (bias) c.in(tensor(d.b, {1, 1, 1, d.s.n}));
  c.out(tensor(y, {d.s.m, 1, 1, d.s.n})).params(FrFcParams{bias ? 1 : 0, relu ? 1 : 0});
  EXPECT_TRUE(c.run());
  return y;
}

const Shape3 kShapes[] = {{1, 1, 1},      {1, 5, 7},    {3, 19, 10},  {37, 70, 33},
                          {64, 130, 100}, {5, 784, 17}, {17, 16, 32}, {128, 33, 65}};

TEST(CpuFc, ForwardMatchesReference) {
  uint32_t seed = 1;
  for (const Shape3& s : kShapes)
    for (int bias = 0; bias < 2; ++bias)
      for (int relu = 0; relu < 2; ++relu) {
        SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias) + " relu=" + std::to_string(relu));
        FcData d(s, seed++);
        const std::vector<float> y = run_fc(d, bias, relu);
        const std::vector<double> nob;
        const auto& b = bias ? fresco::test::to_double(d.b) : nob;
        const std::vector<double> ref = fresco::ref::fc_forward(
            fresco::test::to_double(d.x), fresco::test::to_double(d.w), b, s.m, s.k, s.n, relu);
        const std::vector<double> mag =
            fresco::ref::fc_abs_terms(abs_of(d.x), abs_of(d.w), bias ? abs_of(d.b) : nob, s.m, s.k, s.n);
        EXPECT_TRUE(fresco::test::within(y, ref, float_bound(mag, s.k)));
        if (relu) {
          for (float v : y) ASSERT_GE(v, 0.0f);
        }
      }
}

TEST(CpuFc, ForwardFlattensNhwcInput) {
  // x [3, 4, 5, 2] is an FC input of K = 40 features per sample.
  const Shape3 s{3, 40, 9};
  FcData d(s, 99);
  std::vector<float> y(static_cast<size_t>(s.m * s.n), kNaN);
  OpCall c(FR_OP_FC);
  c.in(tensor(d.x, {3, 4, 5, 2})).in(tensor(d.w, {s.n, 1, 1, s.k})).in(tensor(d.b, {1, 1, 1, s.n}));
  c.out(tensor(y, {s.m, 1, 1, s.n})).params(FrFcParams{1, 0});
  ASSERT_TRUE(c.run());
  const std::vector<double> ref =
      fresco::ref::fc_forward(fresco::test::to_double(d.x), fresco::test::to_double(d.w),
                              fresco::test::to_double(d.b), s.m, s.k, s.n);
  EXPECT_TRUE(fresco::test::all_close(y, ref, 1e-5, 1e-5));
}

TEST(CpuFc, ForwardIsDeterministic) {
  FcData d({37, 70, 33}, 5);
  const std::vector<float> a = run_fc(d, true, true), b = run_fc(d, true, true);
  EXPECT_TRUE(fresco::test::bitwise_equal(a, b));
}

// Runs fc_backward with dy; returns {dw, db (empty without bias), dx (empty without need_dx)}.
struct KernelGrads {
  std::vector<float> dw, db, dx;
};
KernelGrads run_fc_backward(FcData& d, std::vector<float>& dy, bool bias, bool need_dx) {
  const Shape3& s = d.s;
  KernelGrads g;
  g.dw.assign(static_cast<size_t>(s.n * s.k), kNaN);
  if (bias) g.db.assign(static_cast<size_t>(s.n), kNaN);
  if (need_dx) g.dx.assign(static_cast<size_t>(s.m * s.k), kNaN);
  OpCall c(FR_OP_FC_BACKWARD);
  c.in(tensor(dy, {s.m, 1, 1, s.n})).in(tensor(d.x, {s.m, 1, 1, s.k})).in(tensor(d.w, {s.n, 1, 1, s.k}));
  c.out(tensor(g.dw, {s.n, 1, 1, s.k}));
  if (bias) c.out(tensor(g.db, {1, 1, 1, s.n}));
  if (need_dx) c.out(tensor(g.dx, {s.m, 1, 1, s.k}));
  c.params(FrFcBackwardParams{bias ? 1 : 0, need_dx ? 1 : 0});
  EXPECT_TRUE(c.run());
  return g;
}

TEST(CpuFcBackward, MatchesReference) {
  uint32_t seed = 100;
  for (const Shape3& s : kShapes)
    for (int bias = 0; bias < 2; ++bias)
      for (int need_dx = 0; need_dx < 2; ++need_dx) {
        SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias) + " need_dx=" + std::to_string(need_dx));
        FcData d(s, seed);
        std::mt19937 rng(seed++);
        std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f);
        const KernelGrads g = run_fc_backward(d, dy, bias, need_dx);
        const auto ref = fresco::ref::fc_backward(fresco::test::to_double(dy), fresco::test::to_double(d.x),
                                                  fresco::test::to_double(d.w), s.m, s.k, s.n);
        const auto mag = fresco::ref::fc_backward(abs_of(dy), abs_of(d.x), abs_of(d.w), s.m, s.k, s.n);
        EXPECT_TRUE(fresco::test::within(g.dw, ref.dw, float_bound(mag.dw, s.m))) << "dw";
        if (bias) {
          EXPECT_TRUE(fresco::test::within(g.db, ref.db, float_bound(mag.db, s.m))) << "db";
        }
        if (need_dx) {
          EXPECT_TRUE(fresco::test::within(g.dx, ref.dx, float_bound(mag.dx, s.n))) << "dx";
        }
      }
}

TEST(CpuFcBackward, FiniteDifferences) {
  // L(x, w, b) = sum(fc(x, w, b) * R), so dL/dy = R: the kernel's gradients for dy = R must match the
  // numerical derivatives of the double reference forward.
  const Shape3 shapes[] = {{1, 5, 7}, {3, 19, 10}, {4, 11, 6}, {37, 23, 17}};
  uint32_t seed = 200;
  for (const Shape3& s : shapes)
    for (int bias = 0; bias < 2; ++bias)
      for (int need_dx = 0; need_dx < 2; ++need_dx) {
        SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias) + " need_dx=" + std::to_string(need_dx));
        FcData d(s, seed);
        std::mt19937 rng(seed++);
        std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f);
        const KernelGrads g = run_fc_backward(d, r, bias, need_dx);
        std::vector<double> x = fresco::test::to_double(d.x), w = fresco::test::to_double(d.w),
                            b = bias ? fresco::test::to_double(d.b) : std::vector<double>{};
        const std::vector<double> rd = fresco::test::to_double(r);
        auto loss = [&] {
          const std::vector<double> y = fresco::ref::fc_forward(x, w, b, s.m, s.k, s.n);
          double l = 0.0;
          for (size_t i = 0; i < y.size(); ++i) l += y[i] * rd[i];
          return l;
        };
        auto of = [&](std::vector<double>&) { return loss(); };
        const auto iw = fresco::ref::check_indices(w.size(), 96);
        EXPECT_TRUE(fresco::test::grad_check(g.dw, iw, fresco::ref::numeric_gradient(of, w, iw))) << "dw";
        if (bias) {
          const auto ib = fresco::ref::check_indices(b.size(), 96);
          EXPECT_TRUE(fresco::test::grad_check(g.db, ib, fresco::ref::numeric_gradient(of, b, ib))) << "db";
        }
        if (need_dx) {
          const auto ix = fresco::ref::check_indices(x.size(), 96);
          EXPECT_TRUE(fresco::test::grad_check(g.dx, ix, fresco::ref::numeric_gradient(of, x, ix))) << "dx";
        }
      }
}

TEST(CpuFcBackward, NhwcInputGradient) {
  // x and dx as [2, 3, 2, 2] (K = 12): dx comes back in x's layout.
  const Shape3 s{2, 12, 5};
  FcData d(s, 300);
  std::mt19937 rng(301);
  std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f);
  std::vector<float> dw(static_cast<size_t>(s.n * s.k), kNaN), dx(static_cast<size_t>(s.m * s.k), kNaN);
  OpCall c(FR_OP_FC_BACKWARD);
  c.in(tensor(dy, {s.m, 1, 1, s.n})).in(tensor(d.x, {2, 3, 2, 2})).in(tensor(d.w, {s.n, 1, 1, s.k}));
  c.out(tensor(dw, {s.n, 1, 1, s.k})).out(tensor(dx, {2, 3, 2, 2})).params(FrFcBackwardParams{0, 1});
  ASSERT_TRUE(c.run());
  const auto ref = fresco::ref::fc_backward(fresco::test::to_double(dy), fresco::test::to_double(d.x),
                                            fresco::test::to_double(d.w), s.m, s.k, s.n);
  EXPECT_TRUE(fresco::test::all_close(dw, ref.dw, 1e-5, 1e-6));
  EXPECT_TRUE(fresco::test::all_close(dx, ref.dx, 1e-5, 1e-6));
}

TEST(CpuFc, BadInputsReturnErrors) {
  FcData d({3, 8, 4}, 400);
  std::vector<float> y(12), y_bad(15);
  auto base = [&] {
    OpCall c(FR_OP_FC);
    c.in(tensor(d.x, {3, 1, 1, 8})).in(tensor(d.w, {4, 1, 1, 8}));
    return c;
  };
  {
    OpCall c = base();
    const int32_t short_params = 0;
    c.out(tensor(y, {3, 1, 1, 4})).raw_params(&short_params, sizeof(short_params));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c = base();
    c.out(tensor(y, {3, 1, 1, 4}));  // no params at all
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size"));
  }
  {
    OpCall c(FR_OP_FC);  // weight missing
    c.in(tensor(d.x, {3, 1, 1, 8})).out(tensor(y, {3, 1, 1, 4})).params(FrFcParams{0, 0});
    const std::string e = c.run_error();
    EXPECT_TRUE(fresco::test::contains(e, "prepare fc") && fresco::test::contains(e, "expected at least"))
        << e;
  }
  {
    OpCall c = base();  // has_bias without a bias tensor
    c.out(tensor(y, {3, 1, 1, 4})).params(FrFcParams{1, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "no bias tensor")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FC);  // weight K differs from x
    c.in(tensor(d.x, {3, 1, 1, 8})).in(tensor(d.w, {2, 1, 1, 16})).out(tensor(y, {3, 1, 1, 4}));
    c.params(FrFcParams{0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "inputs")) << c.run_error();
  }
  {
    OpCall c = base();  // output of the wrong shape
    c.out(tensor(y_bad, {3, 1, 1, 5})).params(FrFcParams{0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "output shape")) << c.run_error();
  }
}

TEST(CpuFcBackward, BadInputsReturnErrors) {
  FcData d({3, 8, 4}, 500);
  std::vector<float> dy(12, 1.0f), dw(32), db(4), dx(24);
  auto base = [&] {
    OpCall c(FR_OP_FC_BACKWARD);
    c.in(tensor(dy, {3, 1, 1, 4})).in(tensor(d.x, {3, 1, 1, 8})).in(tensor(d.w, {4, 1, 1, 8}));
    return c;
  };
  {
    OpCall c = base();
    const int32_t big[3] = {0, 0, 0};  // 12 bytes, not sizeof(FrFcBackwardParams)
    c.out(tensor(dw, {4, 1, 1, 8})).raw_params(big, sizeof(big));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c = base();  // need_dx without a dx output
    c.out(tensor(dw, {4, 1, 1, 8})).params(FrFcBackwardParams{0, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "need_dx but no dx")) << c.run_error();
  }
  {
    OpCall c = base();  // has_bias without a db output
    c.out(tensor(dw, {4, 1, 1, 8})).params(FrFcBackwardParams{1, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "no db output")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FC_BACKWARD);  // x missing
    c.in(tensor(dy, {3, 1, 1, 4})).in(tensor(d.w, {4, 1, 1, 8})).out(tensor(dw, {4, 1, 1, 8}));
    c.params(FrFcBackwardParams{0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_FC_BACKWARD);  // x has 2 rows, dy 3
    c.in(tensor(dy, {3, 1, 1, 4})).in(tensor(dx.data(), {2, 1, 1, 8})).in(tensor(d.w, {4, 1, 1, 8}));
    c.out(tensor(dw, {4, 1, 1, 8})).params(FrFcBackwardParams{0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "shapes disagree")) << c.run_error();
  }
}

// The harness's own checks must reject what they are meant to reject (a gradient check that always passes
// would make every backward test above vacuous).
TEST(CpuOpHarness, ChecksRejectWrongValues) {
  const std::vector<size_t> idx = {0, 1, 2};
  const std::vector<double> numeric = {1.0, -2.0, 0.5};
  EXPECT_TRUE(fresco::test::grad_check({1.0f, -2.0f, 0.5f}, idx, numeric));
  EXPECT_FALSE(fresco::test::grad_check({1.0f, -2.0f, 0.51f}, idx, numeric));
  EXPECT_FALSE(fresco::test::grad_check({1.0f, 2.0f, 0.5f}, idx, numeric));
  EXPECT_FALSE(fresco::test::grad_check({0.0f, 0.0f, 0.0f}, idx, {0.0, 0.0, 0.0})) << "all-zero gradient";
  EXPECT_FALSE(
      fresco::test::all_close(std::vector<float>{1.0f, kNaN}, std::vector<double>{1.0, 1.0}, 1e-3, 1e-3));
  EXPECT_FALSE(fresco::test::within(std::vector<float>{1.001f}, {1.0}, {1e-4}));
  OpCall missing("no_such_op");
  EXPECT_TRUE(fresco::test::contains(missing.run_error(), "no cpu kernel")) << missing.run_error();
}

}  // namespace

TEST(CpuFcBackward, FusedReluMaskFiniteDifferences) {
  // L = sum(relu(fc(x, w, b)) * R): forward with fused_relu, backward with relu_mask (dy = R, masked in place
  // by the forward's output); gradients must match the numerical derivatives of the double reference.
  const Shape3 shapes[] = {{3, 19, 10}, {37, 23, 17}};
  uint32_t seed = 700;
  for (const Shape3& s : shapes) {
    SCOPED_TRACE(str(s));
    FcData d(s, seed);
    std::mt19937 rng(seed++);
    const std::vector<float> y = run_fc(d, true, true);
    std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f);
    std::vector<float> dy = r;
    std::vector<float> dw(static_cast<size_t>(s.n * s.k), kNaN), db(static_cast<size_t>(s.n), kNaN),
        dx(static_cast<size_t>(s.m * s.k), kNaN);
    OpCall c(FR_OP_FC_BACKWARD);
    c.in(tensor(dy, {s.m, 1, 1, s.n})).in(tensor(d.x, {s.m, 1, 1, s.k})).in(tensor(d.w, {s.n, 1, 1, s.k}));
    c.in(tensor(const_cast<std::vector<float>&>(y), {s.m, 1, 1, s.n}));
    c.out(tensor(dw, {s.n, 1, 1, s.k})).out(tensor(db, {1, 1, 1, s.n})).out(tensor(dx, {s.m, 1, 1, s.k}));
    c.params(FrFcBackwardParams{1, 1, 1, 0});
    ASSERT_TRUE(c.run());
    for (size_t i = 0; i < dy.size(); ++i)
      EXPECT_EQ(dy[i], y[i] > 0.0f ? r[i] : 0.0f) << "dy masked in place";
    std::vector<double> x = fresco::test::to_double(d.x), w = fresco::test::to_double(d.w),
                        b = fresco::test::to_double(d.b);
    const std::vector<double> rd = fresco::test::to_double(r);
    auto of = [&](std::vector<double>&) {
      const std::vector<double> out = fresco::ref::fc_forward(x, w, b, s.m, s.k, s.n, true);
      double l = 0.0;
      for (size_t i = 0; i < out.size(); ++i) l += out[i] * rd[i];
      return l;
    };
    const auto iw = fresco::ref::check_indices(w.size(), 96);
    EXPECT_TRUE(fresco::test::grad_check(dw, iw, fresco::ref::numeric_gradient(of, w, iw))) << "dw";
    const auto ib = fresco::ref::check_indices(b.size(), 96);
    EXPECT_TRUE(fresco::test::grad_check(db, ib, fresco::ref::numeric_gradient(of, b, ib))) << "db";
    const auto ix = fresco::ref::check_indices(x.size(), 96);
    EXPECT_TRUE(fresco::test::grad_check(dx, ix, fresco::ref::numeric_gradient(of, x, ix))) << "dx";
  }
}

TEST(CpuFc, MlpShapesMatchReference) {
  // The shapes of the README's MLP at batch 128, forward and backward.
  const Shape3 shapes[] = {{128, 784, 1024}, {128, 1024, 512}, {128, 512, 256}, {128, 256, 10}};
  uint32_t seed = 900;
  for (const Shape3& s : shapes) {
    SCOPED_TRACE(str(s));
    FcData d(s, seed);
    const std::vector<float> y = run_fc(d, true, false);
    const std::vector<double> ref =
        fresco::ref::fc_forward(fresco::test::to_double(d.x), fresco::test::to_double(d.w),
                                fresco::test::to_double(d.b), s.m, s.k, s.n);
    const std::vector<double> mag =
        fresco::ref::fc_abs_terms(abs_of(d.x), abs_of(d.w), abs_of(d.b), s.m, s.k, s.n);
    EXPECT_TRUE(fresco::test::within(y, ref, float_bound(mag, s.k))) << "y";
    std::mt19937 rng(seed++);
    std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.m * s.n), -1.0f, 1.0f);
    const KernelGrads g = run_fc_backward(d, dy, true, true);
    const auto rg = fresco::ref::fc_backward(fresco::test::to_double(dy), fresco::test::to_double(d.x),
                                             fresco::test::to_double(d.w), s.m, s.k, s.n);
    const auto mg = fresco::ref::fc_backward(abs_of(dy), abs_of(d.x), abs_of(d.w), s.m, s.k, s.n);
    EXPECT_TRUE(fresco::test::within(g.dw, rg.dw, float_bound(mg.dw, s.m))) << "dw";
    EXPECT_TRUE(fresco::test::within(g.db, rg.db, float_bound(mg.db, s.m))) << "db";
    EXPECT_TRUE(fresco::test::within(g.dx, rg.dx, float_bound(mg.dx, s.n))) << "dx";
  }
}
