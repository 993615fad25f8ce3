// Conformance of the CPU batchnorm and batchnorm_backward kernels (NHWC, per-channel statistics): training
// forward (y, save_mean, save_invstd) and running statistics after one and two steps against the double
// reference; inference with running statistics; backward against the reference and central finite
// differences of L = sum(y * R) in x, gamma and beta; bitwise determinism; bad inputs. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/batchnorm.h"
#include "reference/finite_difference.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;
using fresco::test::to_double;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int64_t n, h, w, c;
  int64_t rows() const { return n * h * w; }
  size_t size() const { return static_cast<size_t>(n * h * w * c); }
  std::string str() const {
    return std::to_string(n) + "x" + std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c);
  }
};

const Shape kShapes[] = {{1, 5, 7, 3}, {3, 4, 5, 16},   {3, 3, 3, 1},
                         {1, 1, 2, 3}, {3, 33, 33, 16}, {3, 120, 120, 1}};

struct TrainOut {
  std::vector<float> y, mean, invstd;
};

TrainOut run_train(std::vector<float>& x, const Shape& s, std::vector<float>& gamma, std::vector<float>& beta,
                   std::vector<float>& rm, std::vector<float>& rv, float eps = 1e-5f, float momentum = 0.1f) {
  TrainOut o{std::vector<float>(x.size(), kNaN), std::vector<float>(gamma.size(), kNaN),
             std::vector<float>(gamma.size(), kNaN)};
  OpCall c(FR_OP_BATCHNORM);
  c.in(tensor(x, {s.n, s.h, s.w, s.c}))
      .in(tensor(gamma, {s.c}))
      .in(tensor(beta, {s.c}))
      .out(tensor(o.y, {s.n, s.h, s.w, s.c}))
      .out(tensor(o.mean, {s.c}))
      .out(tensor(o.invstd, {s.c}))
      .rout(fresco::test::range(rm))
      .rout(fresco::test::range(rv))
      .params(FrBatchNormParams{eps, momentum, 1, 0});
  EXPECT_TRUE(c.run());
  return o;
}

struct Grads {
  std::vector<float> dx, dgamma, dbeta;
};

Grads run_backward(std::vector<float>& dy, std::vector<float>& x, const Shape& s, std::vector<float>& gamma,
                   std::vector<float>& mean, std::vector<float>& invstd) {
  Grads g{std::vector<float>(x.size(), kNaN), std::vector<float>(gamma.size(), kNaN),
          std::vector<float>(gamma.size(), kNaN)};
  OpCall c(FR_OP_BATCHNORM_BACKWARD);
  c.in(tensor(dy, {s.n, s.h, s.w, s.c}))
      .in(tensor(x, {s.n, s.h, s.w, s.c}))
      .in(tensor(gamma, {s.c}))
      .in(tensor(mean, {s.c}))
      .in(tensor(invstd, {s.c}))
      .out(tensor(g.dx, {s.n, s.h, s.w, s.c}))
      .out(tensor(g.dgamma, {s.c}))
      .out(tensor(g.dbeta, {s.c}));
  EXPECT_TRUE(c.run());
  return g;
}

struct Inputs {
  std::vector<float> x, gamma, beta, rm, rv;
};

Inputs make_inputs(std::mt19937& rng, const Shape& s) {
  Inputs in;
  in.x = fresco::test::random_floats(rng, s.size(), -1.0f, 3.0f);  // mean ~1: centring matters
  in.gamma = fresco::test::random_floats(rng, static_cast<size_t>(s.c), 0.5f, 1.5f);
  in.beta = fresco::test::random_floats(rng, static_cast<size_t>(s.c), -0.5f, 0.5f);
  in.rm = fresco::test::random_floats(rng, static_cast<size_t>(s.c), -0.2f, 0.2f);
  in.rv = fresco::test::random_floats(rng, static_cast<size_t>(s.c), 0.5f, 1.5f);
  return in;
}

TEST(CpuBatchNorm, TrainForwardAndRunningStatsMatchReference) {
  std::mt19937 rng(21);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(rng, s);
    std::vector<double> rm = to_double(in.rm), rv = to_double(in.rv);
    for (int step = 0; step < 2; ++step) {  // running statistics after one and two steps
      SCOPED_TRACE("step " + std::to_string(step));
      if (step == 1) in.x = fresco::test::random_floats(rng, s.size(), -2.0f, 1.0f);
      const auto ref = fresco::ref::batchnorm_train(to_double(in.x), to_double(in.gamma), to_double(in.beta),
                                                    s.rows(), s.c, 1e-5, 0.1, &rm, &rv);
      const TrainOut o = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
      EXPECT_TRUE(fresco::test::all_close(o.y, ref.y, 1e-5, 2e-5));
      EXPECT_TRUE(fresco::test::all_close(o.mean, ref.mean, 1e-6, 1e-6));
      EXPECT_TRUE(fresco::test::all_close(o.invstd, ref.invstd, 1e-5, 0.0));
      EXPECT_TRUE(fresco::test::all_close(in.rm, rm, 1e-6, 1e-6));
      EXPECT_TRUE(fresco::test::all_close(in.rv, rv, 1e-5, 1e-6));
    }
  }
}

TEST(CpuBatchNorm, RunningVarUsesUnbiasedVariance) {
  // rows = 2 per channel, x = {0, 2}: biased var 1, unbiased 2; momentum 1 takes the batch values.
  std::vector<float> x = {0.0f, 2.0f}, gamma = {1.0f}, beta = {0.0f}, rm = {5.0f}, rv = {5.0f};
  const TrainOut o = run_train(x, {1, 1, 2, 1}, gamma, beta, rm, rv, 0.0f, 1.0f);
  EXPECT_FLOAT_EQ(rm[0], 1.0f);
  EXPECT_FLOAT_EQ(rv[0], 2.0f);
  EXPECT_FLOAT_EQ(o.invstd[0], 1.0f);
  EXPECT_FLOAT_EQ(o.y[0], -1.0f);
  EXPECT_FLOAT_EQ(o.y[1], 1.0f);
}

TEST(CpuBatchNorm, InferenceUsesRunningStats) {
  std::mt19937 rng(22);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(rng, s);
    std::vector<float> y(in.x.size(), kNaN);
    OpCall c(FR_OP_BATCHNORM);
    c.in(tensor(in.x, {s.n, s.h, s.w, s.c}))
        .in(tensor(in.gamma, {s.c}))
        .in(tensor(in.beta, {s.c}))
        .in(tensor(in.rm, {s.c}))
        .in(tensor(in.rv, {s.c}))
        .out(tensor(y, {s.n, s.h, s.w, s.c}))
        .params(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
    ASSERT_TRUE(c.run());
    EXPECT_TRUE(fresco::test::all_close(
        y,
        fresco::ref::batchnorm_inference(to_double(in.x), to_double(in.gamma), to_double(in.beta),
                                         to_double(in.rm), to_double(in.rv), s.c, 1e-5),
        1e-5, 2e-5));
  }
}

// The folded inference form (batchnorm_fold once, then channel_affine) gives inference batchnorm's numbers,
// with and without the fused relu; channel_affine may write in place.
TEST(CpuBatchNorm, FoldedInferenceMatchesReference) {
  std::mt19937 rng(23);
  for (const Shape& s : kShapes)
    for (int relu = 0; relu < 2; ++relu) {
      SCOPED_TRACE(s.str() + " relu=" + std::to_string(relu));
      Inputs in = make_inputs(rng, s);
      std::vector<float> scale(static_cast<size_t>(s.c), kNaN), shift(static_cast<size_t>(s.c), kNaN);
      OpCall f(FR_OP_BATCHNORM_FOLD);
      f.in(tensor(in.gamma, {s.c}))
          .in(tensor(in.beta, {s.c}))
          .in(tensor(in.rm, {s.c}))
          .in(tensor(in.rv, {s.c}))
          .out(tensor(scale, {s.c}))
          .out(tensor(shift, {s.c}))
          .params(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
      ASSERT_TRUE(f.run());
      std::vector<float> y = in.x;  // in place
      OpCall a(FR_OP_CHANNEL_AFFINE);
      a.in(tensor(y, {s.n, s.h, s.w, s.c}))
          .in(tensor(scale, {s.c}))
          .in(tensor(shift, {s.c}))
          .out(tensor(y, {s.n, s.h, s.w, s.c}))
          .params(FrChannelAffineParams{relu, 0});
      ASSERT_TRUE(a.run());
      std::vector<double> ref =
          fresco::ref::batchnorm_inference(to_double(in.x), to_double(in.gamma), to_double(in.beta),
                                           to_double(in.rm), to_double(in.rv), s.c, 1e-5);
      if (relu)
        for (double& v : ref) v = v > 0.0 ? v : 0.0;
      EXPECT_TRUE(fresco::test::all_close(y, ref, 1e-5, 2e-5));
    }
  OpCall bad(FR_OP_CHANNEL_AFFINE);  // scale of the wrong length
  std::vector<float> x(12, 1.0f), sc(3, 1.0f), sh(4, 0.0f), y(12);
  bad.in(tensor(x, {1, 1, 3, 4})).in(tensor(sc, {3})).in(tensor(sh, {4})).out(tensor(y, {1, 1, 3, 4}));
  bad.params(FrChannelAffineParams{0, 0});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "scale and shift")) << bad.run_error();
}

TEST(CpuBatchNorm, BackwardMatchesReference) {
  std::mt19937 rng(23);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(rng, s);
    std::vector<float> dy = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f);
    TrainOut o = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
    const Grads g = run_backward(dy, in.x, s, in.gamma, o.mean, o.invstd);
    const auto ref = fresco::ref::batchnorm_backward(to_double(dy), to_double(in.x), to_double(in.gamma),
                                                     to_double(o.mean), to_double(o.invstd), s.rows(), s.c);
    EXPECT_TRUE(fresco::test::all_close(g.dbeta, ref.dbeta, 1e-5, 1e-4));
    EXPECT_TRUE(fresco::test::all_close(g.dgamma, ref.dgamma, 1e-5, 1e-4));
    EXPECT_TRUE(fresco::test::all_close(g.dx, ref.dx, 1e-4, 1e-5));
  }
}

TEST(CpuBatchNorm, BackwardInPlace) {
  // dx may alias dy.
  std::mt19937 rng(24);
  const Shape s{3, 4, 5, 16};
  Inputs in = make_inputs(rng, s);
  std::vector<float> dy = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f);
  TrainOut o = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
  const Grads ref = run_backward(dy, in.x, s, in.gamma, o.mean, o.invstd);
  std::vector<float> dgamma(static_cast<size_t>(s.c)), dbeta(static_cast<size_t>(s.c));
  OpCall c(FR_OP_BATCHNORM_BACKWARD);
  c.in(tensor(dy, {s.n, s.h, s.w, s.c}))
      .in(tensor(in.x, {s.n, s.h, s.w, s.c}))
      .in(tensor(in.gamma, {s.c}))
      .in(tensor(o.mean, {s.c}))
      .in(tensor(o.invstd, {s.c}))
      .out(tensor(dy, {s.n, s.h, s.w, s.c}))
      .out(tensor(dgamma, {s.c}))
      .out(tensor(dbeta, {s.c}));
  ASSERT_TRUE(c.run());
  EXPECT_TRUE(fresco::test::bitwise_equal(dy, ref.dx));
  EXPECT_TRUE(fresco::test::bitwise_equal(dgamma, ref.dgamma));
}

TEST(CpuBatchNorm, BackwardFiniteDifferences) {
  const Shape shapes[] = {{1, 3, 4, 3}, {3, 2, 3, 1}, {2, 3, 3, 16}};
  std::mt19937 rng(25);
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(rng, s);
    std::vector<float> r = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f);
    TrainOut o = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
    const Grads g = run_backward(r, in.x, s, in.gamma, o.mean, o.invstd);
    std::vector<double> x = to_double(in.x), gamma = to_double(in.gamma), beta = to_double(in.beta);
    const std::vector<double> rd = to_double(r);
    auto loss = [&] {
      const auto y = fresco::ref::batchnorm_train(x, gamma, beta, s.rows(), s.c, 1e-5, 0.1).y;
      double l = 0.0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * rd[i];
      return l;
    };
    auto over = [&](std::vector<double>&) { return loss(); };
    const auto ix = fresco::ref::check_indices(x.size(), 300);
    EXPECT_TRUE(fresco::test::grad_check(g.dx, ix, fresco::ref::numeric_gradient(over, x, ix, 1e-3), 2e-3,
                                         2e-3, 1e-3))
        << "dx";
    const auto ic = fresco::ref::check_indices(gamma.size(), 64);
    EXPECT_TRUE(fresco::test::grad_check(g.dgamma, ic, fresco::ref::numeric_gradient(over, gamma, ic, 1e-3)))
        << "dgamma";
    EXPECT_TRUE(fresco::test::grad_check(g.dbeta, ic, fresco::ref::numeric_gradient(over, beta, ic, 1e-3)))
        << "dbeta";
  }
}

TEST(CpuBatchNorm, Deterministic) {
  std::mt19937 rng(26);
  const Shape s{3, 33, 33, 16};
  Inputs in = make_inputs(rng, s);
  std::vector<float> dy = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f);
  std::vector<float> rm2 = in.rm, rv2 = in.rv;
  TrainOut a = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
  TrainOut b = run_train(in.x, s, in.gamma, in.beta, rm2, rv2);
  EXPECT_TRUE(fresco::test::bitwise_equal(a.y, b.y));
  EXPECT_TRUE(fresco::test::bitwise_equal(a.mean, b.mean));
  EXPECT_TRUE(fresco::test::bitwise_equal(a.invstd, b.invstd));
  EXPECT_TRUE(fresco::test::bitwise_equal(in.rm, rm2));
  EXPECT_TRUE(fresco::test::bitwise_equal(in.rv, rv2));
  const Grads ga = run_backward(dy, in.x, s, in.gamma, a.mean, a.invstd);
  const Grads gb = run_backward(dy, in.x, s, in.gamma, a.mean, a.invstd);
  EXPECT_TRUE(fresco::test::bitwise_equal(ga.dx, gb.dx));
  EXPECT_TRUE(fresco::test::bitwise_equal(ga.dgamma, gb.dgamma));
  EXPECT_TRUE(fresco::test::bitwise_equal(ga.dbeta, gb.dbeta));
}

TEST(CpuBatchNorm, BadInputsReturnErrors) {
  const Shape s{2, 3, 3, 4};
  std::vector<float> x(s.size()), y(s.size()), y_bad(s.size() + 1), g4(4), b4(4), g3(3), m4(4), v4(4), rm(4),
      rv(4);
  auto train = [&](std::vector<float>& gamma, std::vector<float>& yy, const void* p, size_t psize) {
    OpCall c(FR_OP_BATCHNORM);
    c.in(tensor(x, {s.n, s.h, s.w, s.c}))
        .in(tensor(gamma, {static_cast<int64_t>(gamma.size())}))
        .in(tensor(b4, {4}))
        .out(tensor(yy, {static_cast<int64_t>(yy.size())}))
        .out(tensor(m4, {4}))
        .out(tensor(v4, {4}))
        .rout(fresco::test::range(rm))
        .rout(fresco::test::range(rv))
        .raw_params(p, psize);
    return c.run_error();
  };
  const FrBatchNormParams p{1e-5f, 0.1f, 1, 0};
  EXPECT_TRUE(train(g4, y, &p, sizeof p).empty());
  EXPECT_TRUE(fresco::test::contains(train(g4, y, &p, sizeof p - 4), "params size")) << train(g4, y, &p, 12);
  EXPECT_TRUE(fresco::test::contains(train(g4, y, nullptr, 0), "params size"));
  EXPECT_TRUE(fresco::test::contains(train(g3, y, &p, sizeof p), "gamma")) << train(g3, y, &p, sizeof p);
  EXPECT_TRUE(fresco::test::contains(train(g4, y_bad, &p, sizeof p), "sizes differ"));
  {
    OpCall c(FR_OP_BATCHNORM);  // training without running-stat ranges
    c.in(tensor(x, {s.n, s.h, s.w, s.c})).in(tensor(g4, {4})).in(tensor(b4, {4}));
    c.out(tensor(y, {s.n, s.h, s.w, s.c})).out(tensor(m4, {4})).out(tensor(v4, {4})).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_BATCHNORM);  // one value per channel cannot train
    std::vector<float> x1(4), y1(4);
    c.in(tensor(x1, {1, 1, 1, 4})).in(tensor(g4, {4})).in(tensor(b4, {4}));
    c.out(tensor(y1, {1, 1, 1, 4})).out(tensor(m4, {4})).out(tensor(v4, {4}));
    c.rout(fresco::test::range(rm)).rout(fresco::test::range(rv)).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "more than one value")) << c.run_error();
  }
  {
    OpCall c(FR_OP_BATCHNORM);  // inference with a short running_var
    c.in(tensor(x, {s.n, s.h, s.w, s.c})).in(tensor(g4, {4})).in(tensor(b4, {4})).in(tensor(rm, {4}));
    c.in(tensor(g3, {3})).out(tensor(y, {s.n, s.h, s.w, s.c})).params(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "running_var")) << c.run_error();
  }
  {
    OpCall c(FR_OP_BATCHNORM_BACKWARD);  // dy of another size
    c.in(tensor(y_bad, {static_cast<int64_t>(y_bad.size())})).in(tensor(x, {s.n, s.h, s.w, s.c}));
    c.in(tensor(g4, {4})).in(tensor(m4, {4})).in(tensor(v4, {4}));
    c.out(tensor(y, {s.n, s.h, s.w, s.c})).out(tensor(rm, {4})).out(tensor(rv, {4}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  }
  {
    OpCall c(FR_OP_BATCHNORM_BACKWARD);  // save_invstd of the wrong length
    c.in(tensor(y, {s.n, s.h, s.w, s.c})).in(tensor(x, {s.n, s.h, s.w, s.c}));
    c.in(tensor(g4, {4})).in(tensor(m4, {4})).in(tensor(g3, {3}));
    c.out(tensor(y, {s.n, s.h, s.w, s.c})).out(tensor(rm, {4})).out(tensor(rv, {4}));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "save_invstd")) << c.run_error();
  }
}

// Statistics from the sums of x (a fourth input, batchnorm_add's fifth; ops.h): mean = (float)(sum / n) and
// the biased variance sumsq / n - mean^2 from the f32 sums, the rest as usual; close to the two-pass
// reference, and batchnorm_add with sums is batchnorm with sums, then add.
TEST(CpuBatchNorm, StatisticsFromSums) {
  std::mt19937 rng(33);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.str());
    Inputs in = make_inputs(rng, s);
    std::vector<double> rm = to_double(in.rm), rv = to_double(in.rv);
    const auto ref = fresco::ref::batchnorm_train(to_double(in.x), to_double(in.gamma), to_double(in.beta),
                                                  s.rows(), s.c, 1e-5, 0.1, &rm, &rv);
    const std::vector<double> exact = fresco::ref::channel_sums(to_double(in.x), s.c);
    std::vector<float> sums(exact.begin(), exact.end());  // rounded to f32 once, as a conv writes them
    const auto C = static_cast<size_t>(s.c);
    std::vector<float> rm2 = in.rm, rv2 = in.rv;
    TrainOut o{std::vector<float>(in.x.size(), kNaN), std::vector<float>(C, kNaN),
               std::vector<float>(C, kNaN)};
    OpCall c(FR_OP_BATCHNORM);
    c.in(tensor(in.x, {s.n, s.h, s.w, s.c}))
        .in(tensor(in.gamma, {s.c}))
        .in(tensor(in.beta, {s.c}))
        .in(tensor(sums, {2 * s.c}))
        .out(tensor(o.y, {s.n, s.h, s.w, s.c}))
        .out(tensor(o.mean, {s.c}))
        .out(tensor(o.invstd, {s.c}))
        .rout(fresco::test::range(rm2))
        .rout(fresco::test::range(rv2))
        .params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
    ASSERT_TRUE(c.run());
    for (size_t k = 0; k < C; ++k) {
      EXPECT_EQ(o.mean[k], static_cast<float>(static_cast<double>(sums[k]) / static_cast<double>(s.rows())));
      const double var = static_cast<double>(sums[k + C]) / static_cast<double>(s.rows()) -
                         static_cast<double>(o.mean[k]) * o.mean[k];
      EXPECT_EQ(o.invstd[k], static_cast<float>(1.0 / std::sqrt(std::max(var, 0.0) + 1e-5)));
    }
    // f32 sums lose a few bits of the variance against the two-pass double reference
    EXPECT_TRUE(fresco::test::all_close(o.y, ref.y, 1e-4, 1e-4));
    EXPECT_TRUE(fresco::test::all_close(o.mean, ref.mean, 1e-6, 1e-6));
    EXPECT_TRUE(fresco::test::all_close(o.invstd, ref.invstd, 1e-4, 0.0));
    EXPECT_TRUE(fresco::test::all_close(rm2, rm, 1e-6, 1e-6));
    EXPECT_TRUE(fresco::test::all_close(rv2, rv, 1e-4, 1e-6));
    // batchnorm_add takes the sums as its fifth input
    std::vector<float> r = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f), y2(s.size(), kNaN), m2(C),
                       v2(C), rm3 = in.rm, rv3 = in.rv;
    OpCall f(FR_OP_BATCHNORM_ADD);
    f.in(tensor(in.x, {s.n, s.h, s.w, s.c}))
        .in(tensor(in.gamma, {s.c}))
        .in(tensor(in.beta, {s.c}))
        .in(tensor(r, {s.n, s.h, s.w, s.c}))
        .in(tensor(sums, {2 * s.c}))
        .out(tensor(y2, {s.n, s.h, s.w, s.c}))
        .out(tensor(m2, {s.c}))
        .out(tensor(v2, {s.c}))
        .rout(fresco::test::range(rm3))
        .rout(fresco::test::range(rv3))
        .params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
    ASSERT_TRUE(f.run());
    for (size_t i = 0; i < y2.size(); ++i) ASSERT_EQ(y2[i], o.y[i] + r[i]) << i;
    EXPECT_EQ(m2, o.mean);
    EXPECT_EQ(v2, o.invstd);
    EXPECT_EQ(rm3, rm2);
    EXPECT_EQ(rv3, rv2);
  }
  const Shape s{1, 2, 2, 3};
  Inputs in = make_inputs(rng, s);
  std::vector<float> y(s.size()), m(3), v(3), sums(5);
  OpCall bad(FR_OP_BATCHNORM);
  bad.in(tensor(in.x, {s.n, s.h, s.w, s.c})).in(tensor(in.gamma, {s.c})).in(tensor(in.beta, {s.c}));
  bad.in(tensor(sums, {5})).out(tensor(y, {s.n, s.h, s.w, s.c})).out(tensor(m, {s.c})).out(tensor(v, {s.c}));
  bad.rout(fresco::test::range(in.rm)).rout(fresco::test::range(in.rv));
  bad.params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "2C")) << bad.run_error();
}

}  // namespace

// params.relu fuses a following relu: y = max(bn(x), 0), and the backward (sixth input y) equals the plain
// backward of dy * (y > 0).
TEST(CpuBatchNorm, FusedReluForwardAndMaskedBackward) {
  std::mt19937 rng(5);
  const Shape s{3, 4, 5, 16};
  Inputs in = make_inputs(rng, s);
  std::vector<float> rm2 = in.rm, rv2 = in.rv;
  const TrainOut plain = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
  TrainOut fused{std::vector<float>(in.x.size(), kNaN), std::vector<float>(16, kNaN),
                 std::vector<float>(16, kNaN)};
  OpCall f(FR_OP_BATCHNORM);
  f.in(tensor(in.x, {s.n, s.h, s.w, s.c}))
      .in(tensor(in.gamma, {s.c}))
      .in(tensor(in.beta, {s.c}))
      .out(tensor(fused.y, {s.n, s.h, s.w, s.c}))
      .out(tensor(fused.mean, {s.c}))
      .out(tensor(fused.invstd, {s.c}))
      .rout(fresco::test::range(rm2))
      .rout(fresco::test::range(rv2))
      .params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  ASSERT_TRUE(f.run());
  size_t zeros = 0;
  for (size_t i = 0; i < plain.y.size(); ++i) {
    ASSERT_EQ(fused.y[i], plain.y[i] > 0.0f ? plain.y[i] : 0.0f) << i;
    zeros += fused.y[i] == 0.0f;
  }
  EXPECT_GT(zeros, plain.y.size() / 4);  // the mask really cuts
  std::vector<float> dy = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f);
  for (size_t i = 0; i < dy.size(); ++i)  // masked gradients that are not finite are masked too
    if (fused.y[i] <= 0.0f && i % 3 != 0) dy[i] = i % 3 == 1 ? INFINITY : kNaN;
  std::vector<float> masked = dy;
  for (size_t i = 0; i < dy.size(); ++i) masked[i] = fused.y[i] > 0.0f ? dy[i] : 0.0f;
  const Grads want = run_backward(masked, in.x, s, in.gamma, fused.mean, fused.invstd);
  Grads got{std::vector<float>(in.x.size(), kNaN), std::vector<float>(16, kNaN),
            std::vector<float>(16, kNaN)};
  OpCall b(FR_OP_BATCHNORM_BACKWARD);
  b.in(tensor(dy, {s.n, s.h, s.w, s.c}))
      .in(tensor(in.x, {s.n, s.h, s.w, s.c}))
      .in(tensor(in.gamma, {s.c}))
      .in(tensor(fused.mean, {s.c}))
      .in(tensor(fused.invstd, {s.c}))
      .in(tensor(fused.y, {s.n, s.h, s.w, s.c}))
      .out(tensor(got.dx, {s.n, s.h, s.w, s.c}))
      .out(tensor(got.dgamma, {s.c}))
      .out(tensor(got.dbeta, {s.c}))
      .params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  ASSERT_TRUE(b.run());
  EXPECT_EQ(got.dx, want.dx);
  EXPECT_EQ(got.dgamma, want.dgamma);
  EXPECT_EQ(got.dbeta, want.dbeta);
}

// batchnorm_add (a batchnorm computed by the residual join that reads it) is batchnorm, then + r, then the
// join's relu, bit for bit, with the same statistics; it refuses inference params and a residual of another
// size; its subsampled output (a fourth) holds y's even rows and columns.
TEST(CpuBatchNorm, BatchNormAddIsBatchNormThenAddThenRelu) {
  std::mt19937 rng(9);
  const Shape s{3, 4, 5, 16};
  Inputs in = make_inputs(rng, s);
  std::vector<float> rm2 = in.rm, rv2 = in.rv;
  const TrainOut plain = run_train(in.x, s, in.gamma, in.beta, in.rm, in.rv);
  std::vector<float> r = fresco::test::random_floats(rng, s.size(), -2.0f, 1.0f);
  for (int relu : {0, 1}) {
    std::vector<float> rm3 = rm2, rv3 = rv2;
    TrainOut fused{std::vector<float>(in.x.size(), kNaN), std::vector<float>(16, kNaN),
                   std::vector<float>(16, kNaN)};
    OpCall f(FR_OP_BATCHNORM_ADD);
    f.in(tensor(in.x, {s.n, s.h, s.w, s.c}))
        .in(tensor(in.gamma, {s.c}))
        .in(tensor(in.beta, {s.c}))
        .in(tensor(r, {s.n, s.h, s.w, s.c}))
        .out(tensor(fused.y, {s.n, s.h, s.w, s.c}))
        .out(tensor(fused.mean, {s.c}))
        .out(tensor(fused.invstd, {s.c}))
        .rout(fresco::test::range(rm3))
        .rout(fresco::test::range(rv3))
        .params(FrBatchNormParams{1e-5f, 0.1f, 1, relu});
    ASSERT_TRUE(f.run());
    size_t zeros = 0;
    for (size_t i = 0; i < plain.y.size(); ++i) {
      const float sum = plain.y[i] + r[i];
      ASSERT_EQ(fused.y[i], relu && !(sum > 0.0f) ? 0.0f : sum) << i << " relu " << relu;
      zeros += fused.y[i] == 0.0f;
    }
    if (relu) {
      EXPECT_GT(zeros, plain.y.size() / 4);  // the relu really cuts
    }
    EXPECT_EQ(fused.mean, plain.mean);
    EXPECT_EQ(fused.invstd, plain.invstd);
    EXPECT_EQ(rm3, in.rm);  // the running statistics moved as batchnorm's did
    EXPECT_EQ(rv3, in.rv);
  }
  std::vector<float> y(s.size()), m(16), v(16), short_r(s.size() - 1);
  OpCall bad(FR_OP_BATCHNORM_ADD);
  bad.in(tensor(in.x, {s.n, s.h, s.w, s.c})).in(tensor(in.gamma, {s.c})).in(tensor(in.beta, {s.c}));
  bad.in(tensor(short_r, {static_cast<int64_t>(short_r.size())}));
  bad.out(tensor(y, {s.n, s.h, s.w, s.c})).out(tensor(m, {s.c})).out(tensor(v, {s.c}));
  bad.rout(fresco::test::range(rm2))
      .rout(fresco::test::range(rv2))
      .params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "residual")) << bad.run_error();
  OpCall infer(FR_OP_BATCHNORM_ADD);
  infer.in(tensor(in.x, {s.n, s.h, s.w, s.c})).in(tensor(in.gamma, {s.c})).in(tensor(in.beta, {s.c}));
  infer.in(tensor(r, {s.n, s.h, s.w, s.c})).out(tensor(y, {s.n, s.h, s.w, s.c}));
  infer.params(FrBatchNormParams{1e-5f, 0.1f, 0, 1});
  EXPECT_TRUE(fresco::test::contains(infer.run_error(), "training only")) << infer.run_error();
  // the subsampled output (ops.h): y's even rows and columns of the 4 x 5 map (2 x 3), and refused when y
  // does not have x's shape (the kernel indexes y2 from it)
  std::vector<float> y2(static_cast<size_t>(s.n * 2 * 3 * s.c), kNaN), y4(s.size(), kNaN), rm4 = in.rm,
                                                                                           rv4 = in.rv;
  auto with_sub = [&](std::initializer_list<int64_t> y_dims) {
    OpCall f(FR_OP_BATCHNORM_ADD);
    f.in(tensor(in.x, {s.n, s.h, s.w, s.c})).in(tensor(in.gamma, {s.c})).in(tensor(in.beta, {s.c}));
    f.in(tensor(r, {s.n, s.h, s.w, s.c})).out(tensor(y4, y_dims)).out(tensor(m, {s.c})).out(tensor(v, {s.c}));
    f.out(tensor(y2, {s.n, 2, 3, s.c}));
    f.rout(fresco::test::range(rm4))
        .rout(fresco::test::range(rv4))
        .params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
    return f;
  };
  OpCall sub = with_sub({s.n, s.h, s.w, s.c});
  ASSERT_TRUE(sub.run());
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t q = 0; q < 3; ++q)
        for (int64_t k = 0; k < s.c; ++k)
          ASSERT_EQ(y2[static_cast<size_t>(((i * 2 + p) * 3 + q) * s.c + k)],
                    y4[static_cast<size_t>(((i * s.h + 2 * p) * s.w + 2 * q) * s.c + k)]);
  OpCall mismatched = with_sub({s.n, s.w, s.h, s.c});
  EXPECT_TRUE(fresco::test::contains(mismatched.run_error(), "x's shape")) << mismatched.run_error();
}

// The gradient sums (ops.h, "Gradient sums"): relu_backward and add_relu_backward with x and save_mean write
// the same dx as without them and gsums = the sums batchnorm_backward needs (sum dx, sum dx (x - mean)),
// checked against double sums; batchnorm_backward given them (sixth input, no fused relu) matches the one
// that computes them itself. Wrong operands are refused with messages.
TEST(CpuBatchNorm, GradientSumsFromTheMaskingPass) {
  std::mt19937 rng(21);
  for (const Shape& s : {Shape{3, 4, 5, 16}, Shape{2, 33, 33, 8}, Shape{1, 1, 2, 3}}) {
    SCOPED_TRACE(s.str());
    const auto C = static_cast<size_t>(s.c);
    Inputs in = make_inputs(rng, s);
    std::vector<float> a = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f),
                       b = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f),
                       y = fresco::test::random_floats(rng, s.size(), -1.0f, 1.0f),
                       mean = fresco::test::random_floats(rng, C, 0.5f, 1.5f),
                       invstd = fresco::test::random_floats(rng, C, 0.5f, 2.0f);
    for (bool two : {true, false}) {
      SCOPED_TRACE(two ? "add_relu_backward" : "relu_backward");
      auto map = [&](std::vector<float>& v) { return tensor(v, {s.n, s.h, s.w, s.c}); };
      auto masking = [&](bool sums, std::vector<float>& dx, std::vector<float>& gs) {
        OpCall c(two ? FR_OP_ADD_RELU_BACKWARD : FR_OP_RELU_BACKWARD);
        c.in(map(a));
        if (two) c.in(map(b));
        c.in(map(y)).out(map(dx));
        if (sums) c.in(map(in.x)).in(tensor(mean, {s.c})).out(tensor(gs, {2 * s.c}));
        EXPECT_TRUE(c.run());
      };
      std::vector<float> plain(s.size(), kNaN), dx(s.size(), kNaN), gs(2 * C, kNaN), unused;
      masking(false, plain, unused);
      masking(true, dx, gs);
      EXPECT_EQ(dx, plain);
      {  // two (x, save_mean) pairs: each gsums is the one-pair pass's for its x
        std::vector<float> x2 = fresco::test::random_floats(rng, s.size(), -1.0f, 3.0f), m2 = mean,
                           dx2(s.size()), gs1(2 * C, kNaN), gs2(2 * C, kNaN), dx3(s.size()), gs3(2 * C, kNaN);
        OpCall c(two ? FR_OP_ADD_RELU_BACKWARD : FR_OP_RELU_BACKWARD);
        c.in(map(a));
        if (two) c.in(map(b));
        c.in(map(y)).in(map(in.x)).in(tensor(mean, {s.c})).in(map(x2)).in(tensor(m2, {s.c}));
        c.out(map(dx2)).out(tensor(gs1, {2 * s.c})).out(tensor(gs2, {2 * s.c}));
        ASSERT_TRUE(c.run());
        EXPECT_EQ(dx2, plain);
        EXPECT_EQ(gs1, gs);
        OpCall one(two ? FR_OP_ADD_RELU_BACKWARD : FR_OP_RELU_BACKWARD);
        one.in(map(a));
        if (two) one.in(map(b));
        one.in(map(y)).in(map(x2)).in(tensor(m2, {s.c})).out(map(dx3)).out(tensor(gs3, {2 * s.c}));
        ASSERT_TRUE(one.run());
        EXPECT_EQ(gs2, gs3);
      }
      for (size_t k = 0; k < C; ++k) {
        double sd = 0.0, sdx = 0.0;
        for (size_t r = 0; r < static_cast<size_t>(s.rows()); ++r) {
          sd += dx[r * C + k];
          sdx += static_cast<double>(dx[r * C + k]) * (static_cast<double>(in.x[r * C + k]) - mean[k]);
        }
        EXPECT_NEAR(gs[k], sd, 1e-6 * (1.0 + std::fabs(sd))) << k;
        EXPECT_NEAR(gs[C + k], sdx, 1e-6 * (1.0 + std::fabs(sdx))) << k;
      }
      const Grads want = run_backward(dx, in.x, s, in.gamma, mean, invstd);
      Grads got{std::vector<float>(s.size(), kNaN), std::vector<float>(C, kNaN), std::vector<float>(C, kNaN)};
      OpCall bb(FR_OP_BATCHNORM_BACKWARD);
      bb.in(map(dx))
          .in(map(in.x))
          .in(tensor(in.gamma, {s.c}))
          .in(tensor(mean, {s.c}))
          .in(tensor(invstd, {s.c}))
          .in(tensor(gs, {2 * s.c}))
          .out(map(got.dx))
          .out(tensor(got.dgamma, {s.c}))
          .out(tensor(got.dbeta, {s.c}))
          .params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
      ASSERT_TRUE(bb.run());
      // the totals handed over in f32 rather than double: a few ulp
      EXPECT_TRUE(fresco::test::all_close(got.dx, to_double(want.dx), 1e-5, 1e-6));
      EXPECT_TRUE(fresco::test::all_close(got.dgamma, to_double(want.dgamma), 1e-6, 1e-6));
      EXPECT_TRUE(fresco::test::all_close(got.dbeta, to_double(want.dbeta), 1e-6, 1e-6));
    }
  }
  const Shape s{1, 2, 2, 3};
  auto map = [&](std::vector<float>& v) { return tensor(v, {1, 2, 2, 3}); };
  std::vector<float> a(12, 1.0f), y(12, 1.0f), x(12, 1.0f), dx(12), mean(3), gs5(5), gs6(6);
  OpCall wrong(FR_OP_RELU_BACKWARD);
  wrong.in(map(a)).in(map(y)).in(map(x)).in(tensor(mean, {3}));
  wrong.out(map(dx)).out(tensor(gs5, {5}));
  EXPECT_TRUE(fresco::test::contains(wrong.run_error(), "2C")) << wrong.run_error();
  OpCall no_out(FR_OP_RELU_BACKWARD);
  no_out.in(map(a)).in(map(y)).in(map(x)).in(tensor(mean, {3}));
  no_out.out(map(dx));
  EXPECT_TRUE(fresco::test::contains(no_out.run_error(), "gsums")) << no_out.run_error();
  OpCall odd(FR_OP_RELU_BACKWARD);  // a gsums output per (x, save_mean) pair
  odd.in(map(a)).in(map(y)).in(map(x)).in(tensor(mean, {3})).in(map(x));
  odd.out(map(dx)).out(tensor(gs6, {6}));
  EXPECT_TRUE(fresco::test::contains(odd.run_error(), "pairs")) << odd.run_error();
  Inputs in = make_inputs(rng, s);
  std::vector<float> m(3, 0.0f), v(3, 1.0f), g(12), dg(3), db(3);
  OpCall bad(FR_OP_BATCHNORM_BACKWARD);
  bad.in(map(a)).in(map(x)).in(tensor(in.gamma, {3})).in(tensor(m, {3})).in(tensor(v, {3}));
  bad.in(tensor(gs5, {5})).out(map(g)).out(tensor(dg, {3})).out(tensor(db, {3}));
  bad.params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "2C")) << bad.run_error();
}
