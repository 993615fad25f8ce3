// Conformance of the CPU conv2d and conv2d_backward kernels (NHWC, weights [K, R, S, C/g]): forward and
// backward against the double 7-loop reference (tests/reference/conv2d.h) within the float bound (L + 2) eps
// sum|terms| over kernels 1x1/3x3/7x7, stride, padding, dilation, groups and depthwise, bias on/off, several
// image blocks; backward against central finite differences of L = sum(y * R); bitwise determinism; bad
// inputs return errors. Outputs start as NaN, so every element must be written. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/batchnorm.h"
#include "reference/conv2d.h"
#include "reference/finite_difference.h"
#include "support/scoped_env.h"

namespace {

using fresco::ref::ConvShape;
using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Square-parameter shape: n, h, w, c, k, kernel, stride, pad, dilation, groups.
ConvShape sq(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t ks, int64_t stride, int64_t pad,
             int64_t dil, int64_t groups) {
  return ConvShape{n, h, w, c, k, ks, ks, stride, stride, pad, pad, dil, dil, groups};
}

std::string str(const ConvShape& s) {
  return "x[" + std::to_string(s.n) + "," + std::to_string(s.h) + "," + std::to_string(s.w) + "," +
         std::to_string(s.c) + "] w[" + std::to_string(s.k) + "," + std::to_string(s.r) + "," +
         std::to_string(s.s) + "," + std::to_string(s.c / s.groups) + "] stride " +
         std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + " pad " + std::to_string(s.pad_h) +
         "x" + std::to_string(s.pad_w) + " dil " + std::to_string(s.dil_h) + "x" + std::to_string(s.dil_w) +
         " groups " + std::to_string(s.groups);
}

FrConvParams params_of(const ConvShape& s, bool bias) {
  return FrConvParams{static_cast<int32_t>(s.r),        static_cast<int32_t>(s.s),
                      static_cast<int32_t>(s.stride_h), static_cast<int32_t>(s.stride_w),
                      static_cast<int32_t>(s.pad_h),    static_cast<int32_t>(s.pad_w),
                      static_cast<int32_t>(s.dil_h),    static_cast<int32_t>(s.dil_w),
                      static_cast<int32_t>(s.groups),   bias ? 1 : 0};
}

// Random operands of one convolution (floats, as the kernel sees them).
struct ConvData {
  ConvShape s;
  std::vector<float> x, w, b;
  ConvData(const ConvShape& shape, uint32_t seed) : s(shape) {
    std::mt19937 rng(seed);
    x = fresco::test::random_floats(rng, static_cast<size_t>(s.x_size()), -1.0f, 1.0f);
    w = fresco::test::random_floats(rng, static_cast<size_t>(s.w_size()), -0.5f, 0.5f);
    b = fresco::test::random_floats(rng, static_cast<size_t>(s.k), -1.0f, 1.0f);
  }
  FrTensor xt() { return tensor(x, {s.n, s.h, s.w, s.c}); }
  FrTensor wt() { return tensor(w, {s.k, s.r, s.s, s.c / s.groups}); }
  FrTensor bt() { return tensor(b, {1, 1, 1, s.k}); }
};

using fresco::test::abs_of;
using fresco::test::float_bound;

std::vector<float> run_conv(ConvData& d, bool bias) {
  const ConvShape& s = d.s;
  std::vector<float> y(static_cast<size_t>(s.y_size()), kNaN);
  OpCall c(FR_OP_CONV2D);
  c.in(d.xt()).in(d.wt());
  if (bias) c.in(d.bt());
  c.out(tensor(y, {s.n, s.p(), s.q(), s.k})).params(params_of(s, bias));
  EXPECT_TRUE(c.run());
  return y;
}

struct KernelGrads {
  std::vector<float> dw, db, dx;
};
// part 0: every gradient (dx when need_dx); part 1: dx only; part 2: dw and db only.
KernelGrads run_conv_backward(ConvData& d, std::vector<float>& dy, bool bias, bool need_dx, int part = 0) {
  const ConvShape& s = d.s;
  KernelGrads g;
  const bool weights = part != 1, input = part == 1 || (part == 0 && need_dx);
  if (weights) g.dw.assign(static_cast<size_t>(s.w_size()), kNaN);
  if (weights && bias) g.db.assign(static_cast<size_t>(s.k), kNaN);
  if (input) g.dx.assign(static_cast<size_t>(s.x_size()), kNaN);
  OpCall c(FR_OP_CONV2D_BACKWARD);
  c.in(tensor(dy, {s.n, s.p(), s.q(), s.k})).in(d.xt()).in(d.wt());
  if (weights) c.out(tensor(g.dw, {s.k, s.r, s.s, s.c / s.groups}));
  if (weights && bias) c.out(tensor(g.db, {1, 1, 1, s.k}));
  if (input) c.out(tensor(g.dx, {s.n, s.h, s.w, s.c}));
  c.params(FrConvBackwardParams{params_of(s, bias), need_dx ? 1 : 0, part});
  EXPECT_TRUE(c.run());
  return g;
}

// Geometries of the reference comparisons: n, h, w, c, k, kernel, stride, pad, dilation, groups.
const ConvShape kShapes[] = {
    sq(1, 5, 5, 3, 4, 1, 1, 0, 1, 1),             // 1x1, direct (no im2col)
    sq(3, 7, 6, 8, 6, 1, 1, 0, 1, 2),             // 1x1 direct, groups 2
    sq(2, 9, 9, 4, 5, 1, 2, 0, 1, 1),             // 1x1 stride 2 (projection shortcut)
    sq(1, 6, 7, 3, 8, 1, 1, 1, 1, 1),             // 1x1 with padding
    sq(3, 8, 8, 3, 5, 3, 1, 1, 1, 1),             // 3x3 same
    sq(1, 9, 11, 5, 7, 3, 2, 1, 1, 1),            // 3x3 stride 2, odd sizes
    sq(3, 10, 9, 4, 6, 3, 1, 0, 1, 1),            // 3x3 valid
    sq(2, 11, 10, 6, 4, 3, 1, 2, 2, 1),           // dilation 2
    sq(1, 12, 13, 3, 4, 3, 2, 3, 2, 1),           // stride 2, pad 3, dilation 2
    sq(3, 8, 9, 6, 4, 3, 1, 1, 1, 2),             // groups 2
    sq(1, 13, 13, 4, 6, 3, 1, 1, 2, 2),           // groups 2, dilation 2
    sq(2, 9, 8, 8, 8, 3, 1, 1, 1, 8),             // depthwise
    sq(3, 10, 10, 6, 6, 3, 2, 1, 1, 6),           // depthwise stride 2
    sq(1, 15, 14, 3, 8, 7, 2, 3, 1, 1),           // 7x7 stride 2 pad 3 (stem)
    sq(2, 9, 9, 4, 4, 7, 1, 3, 1, 4),             // 7x7 depthwise
    sq(3, 4, 4, 2, 3, 3, 1, 0, 1, 1),             // output 2x2
    {2, 9, 7, 4, 6, 3, 1, 2, 1, 1, 0, 1, 2, 2},   // 3x1 kernel, stride 2x1, pad 1x0, dilation 1x2, groups 2
    {1, 6, 10, 3, 2, 1, 5, 1, 3, 0, 2, 1, 1, 1},  // 1x5 kernel, stride 1x3, pad 0x2
};

TEST(CpuConv2d, ForwardMatchesReference) {
  uint32_t seed = 1;
  for (const ConvShape& s : kShapes)
    for (int bias = 0; bias < 2; ++bias) {
      SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias));
      ConvData d(s, seed++);
      const std::vector<float> y = run_conv(d, bias);
      const std::vector<double> nob;
      const std::vector<double> ref =
          fresco::ref::conv2d_forward(fresco::test::to_double(d.x), fresco::test::to_double(d.w),
                                      bias ? fresco::test::to_double(d.b) : nob, s);
      const std::vector<double> mag =
          fresco::ref::conv2d_forward(abs_of(d.x), abs_of(d.w), bias ? abs_of(d.b) : nob, s);
      EXPECT_TRUE(fresco::test::within(y, ref, float_bound(mag, s.r * s.s * (s.c / s.groups) + 1)));
    }
}

TEST(CpuConv2dBackward, MatchesReference) {
  uint32_t seed = 100;
  for (const ConvShape& s : kShapes)
    for (int bias = 0; bias < 2; ++bias)
      for (int need_dx = 0; need_dx < 2; ++need_dx) {
        SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias) + " need_dx=" + std::to_string(need_dx));
        ConvData d(s, seed);
        std::mt19937 rng(seed++);
        std::vector<float> dy =
            fresco::test::random_floats(rng, static_cast<size_t>(s.y_size()), -1.0f, 1.0f);
        const KernelGrads g = run_conv_backward(d, dy, bias, need_dx);
        const auto ref = fresco::ref::conv2d_backward(
            fresco::test::to_double(dy), fresco::test::to_double(d.x), fresco::test::to_double(d.w), s);
        const auto mag = fresco::ref::conv2d_backward(abs_of(dy), abs_of(d.x), abs_of(d.w), s);
        const int64_t rows = s.n * s.p() * s.q();
        EXPECT_TRUE(fresco::test::within(g.dw, ref.dw, float_bound(mag.dw, rows))) << "dw";
        if (bias) {
          EXPECT_TRUE(fresco::test::within(g.db, ref.db, float_bound(mag.db, rows))) << "db";
        }
        if (need_dx) {
          EXPECT_TRUE(fresco::test::within(g.dx, ref.dx, float_bound(mag.dx, s.r * s.s * (s.k / s.groups))))
              << "dx";
        }
      }
}

// The split backward (input gradient on the main stream, weight gradient on the side stream) gives the same
// bits as the whole call, for every geometry.
TEST(CpuConv2dBackward, PartsEqualTheWholeCall) {
  uint32_t seed = 300;
  for (const ConvShape& s : kShapes)
    for (int bias = 0; bias < 2; ++bias) {
      SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias));
      ConvData d(s, seed);
      std::mt19937 rng(seed++);
      std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.y_size()), -1.0f, 1.0f);
      const KernelGrads whole = run_conv_backward(d, dy, bias, true, 0);
      const KernelGrads input = run_conv_backward(d, dy, bias, true, 1);
      const KernelGrads weight = run_conv_backward(d, dy, bias, true, 2);
      EXPECT_TRUE(fresco::test::bitwise_equal(input.dx, whole.dx)) << "dx";
      EXPECT_TRUE(fresco::test::bitwise_equal(weight.dw, whole.dw)) << "dw";
      EXPECT_TRUE(fresco::test::bitwise_equal(weight.db, whole.db)) << "db";
      EXPECT_TRUE(input.dw.empty() && weight.dx.empty());
    }
}

TEST(CpuConv2dBackward, FiniteDifferences) {
  // L(x, w, b) = sum(conv(x, w, b) * R), so dL/dy = R: the kernel's gradients for dy = R must match the
  // numerical derivatives of the double reference forward.
  const ConvShape shapes[] = {sq(2, 5, 6, 3, 4, 3, 1, 1, 1, 1), sq(1, 7, 7, 4, 4, 3, 2, 1, 2, 2),
                              sq(2, 6, 6, 4, 4, 3, 1, 1, 1, 4), sq(1, 9, 9, 2, 3, 7, 2, 3, 1, 1),
                              sq(2, 4, 5, 4, 6, 1, 1, 0, 1, 2), sq(3, 7, 5, 3, 2, 1, 2, 0, 1, 1)};
  uint32_t seed = 200;
  for (const ConvShape& s : shapes) {
    SCOPED_TRACE(str(s));
    ConvData d(s, seed);
    std::mt19937 rng(seed++);
    std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(s.y_size()), -1.0f, 1.0f);
    const KernelGrads g = run_conv_backward(d, r, true, true);
    std::vector<double> x = fresco::test::to_double(d.x), w = fresco::test::to_double(d.w),
                        b = fresco::test::to_double(d.b);
    const std::vector<double> rd = fresco::test::to_double(r);
    auto of = [&](std::vector<double>&) {
      const std::vector<double> y = fresco::ref::conv2d_forward(x, w, b, s);
      double l = 0.0;
      for (size_t i = 0; i < y.size(); ++i) l += y[i] * rd[i];
      return l;
    };
    const auto iw = fresco::ref::check_indices(w.size(), 48);
    EXPECT_TRUE(fresco::test::grad_check(g.dw, iw, fresco::ref::numeric_gradient(of, w, iw))) << "dw";
    const auto ib = fresco::ref::check_indices(b.size(), 48);
    EXPECT_TRUE(fresco::test::grad_check(g.db, ib, fresco::ref::numeric_gradient(of, b, ib))) << "db";
    const auto ix = fresco::ref::check_indices(x.size(), 48);
    EXPECT_TRUE(fresco::test::grad_check(g.dx, ix, fresco::ref::numeric_gradient(of, x, ix))) << "dx";
  }
}

TEST(CpuConv2d, SeveralImageBlocksMatchReference) {
  // Each image's im2col matrix here holds 28*28*576 floats, so the kernels work on blocks of fewer images
  // than N (the last block shorter); dw sums the blocks.
  const ConvShape s = sq(5, 28, 28, 64, 16, 3, 1, 1, 1, 1);
  ConvData d(s, 300);
  const std::vector<float> y = run_conv(d, true);
  const auto xd = fresco::test::to_double(d.x), wd = fresco::test::to_double(d.w);
  const std::vector<double> ref = fresco::ref::conv2d_forward(xd, wd, fresco::test::to_double(d.b), s);
  const std::vector<double> mag = fresco::ref::conv2d_forward(abs_of(d.x), abs_of(d.w), abs_of(d.b), s);
  EXPECT_TRUE(fresco::test::within(y, ref, float_bound(mag, 577))) << "y";
  std::mt19937 rng(301);
  std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.y_size()), -1.0f, 1.0f);
  const KernelGrads g = run_conv_backward(d, dy, true, true);
  const auto rg = fresco::ref::conv2d_backward(fresco::test::to_double(dy), xd, wd, s);
  const auto mg = fresco::ref::conv2d_backward(abs_of(dy), abs_of(d.x), abs_of(d.w), s);
  const int64_t rows = s.n * s.p() * s.q();
  EXPECT_TRUE(fresco::test::within(g.dw, rg.dw, float_bound(mg.dw, rows))) << "dw";
  EXPECT_TRUE(fresco::test::within(g.db, rg.db, float_bound(mg.db, rows))) << "db";
  EXPECT_TRUE(fresco::test::within(g.dx, rg.dx, float_bound(mg.dx, 9 * 16))) << "dx";
}

TEST(CpuConv2d, IsDeterministic) {
  const ConvShape shapes[] = {sq(5, 28, 28, 64, 16, 3, 1, 1, 1, 1), sq(3, 10, 10, 6, 6, 3, 2, 1, 1, 6),
                              sq(4, 12, 12, 32, 48, 1, 1, 0, 1, 1)};
  uint32_t seed = 400;
  for (const ConvShape& s : shapes) {
    SCOPED_TRACE(str(s));
    ConvData d(s, seed);
    std::mt19937 rng(seed++);
    EXPECT_TRUE(fresco::test::bitwise_equal(run_conv(d, true), run_conv(d, true))) << "y";
    std::vector<float> dy = fresco::test::random_floats(rng, static_cast<size_t>(s.y_size()), -1.0f, 1.0f);
    const KernelGrads a = run_conv_backward(d, dy, true, true), b = run_conv_backward(d, dy, true, true);
    EXPECT_TRUE(fresco::test::bitwise_equal(a.dw, b.dw)) << "dw";
    EXPECT_TRUE(fresco::test::bitwise_equal(a.db, b.db)) << "db";
    EXPECT_TRUE(fresco::test::bitwise_equal(a.dx, b.dx)) << "dx";
  }
}

// Convolutions of at most 32 taps per group run on XNNPACK (plugins/cpu/xnn/xnn_conv.h; every shape above
// of that size did): against the packed GEMM (FRESCO_CPU_XNNPACK=0) the same values within float rounding,
// over blocks of images (41 images: two of XNNPACK's blocks of 32), with a bias and through the sums output;
// the workspace shows which path prepare chose (XNNPACK's arena against im2col and the GEMM's packing).
TEST(CpuConv2d, FewTapsRunOnXnnpackLikeThePackedGemm) {
  const ConvShape shapes[] = {sq(41, 12, 12, 3, 16, 3, 1, 1, 1, 1), sq(5, 14, 14, 1, 8, 5, 2, 2, 1, 1),
                              sq(4, 9, 9, 6, 6, 3, 2, 1, 1, 6)};
  uint32_t seed = 900;
  for (const ConvShape& s : shapes)
    for (int bias = 0; bias < 2; ++bias)
      for (bool sums : {false, true}) {
        if (bias && sums) continue;  // the sums output takes no bias (ops.h)
        SCOPED_TRACE(str(s) + " bias=" + std::to_string(bias) + (sums ? " sums" : ""));
        ConvData d(s, seed++);
        std::vector<float> y[2], sm[2];
        uint64_t ws[2] = {0, 0};
        for (int xnn = 0; xnn < 2; ++xnn) {
          fresco::test::ScopedEnv env("FRESCO_CPU_XNNPACK", xnn ? "1" : "0");
          y[xnn].assign(static_cast<size_t>(s.y_size()), kNaN);
          sm[xnn].assign(static_cast<size_t>(2 * s.k), kNaN);
          OpCall c(FR_OP_CONV2D);
          c.in(d.xt()).in(d.wt());
          if (bias) c.in(d.bt());
          c.out(tensor(y[xnn], {s.n, s.p(), s.q(), s.k}));
          if (sums) c.out(tensor(sm[xnn], {2 * s.k}));
          c.params(params_of(s, bias));
          ASSERT_TRUE(c.run());
          ws[xnn] = c.workspace_bytes();
        }
        EXPECT_NE(ws[0], ws[1]) << "both runs took one path";
        EXPECT_TRUE(fresco::test::all_close(y[1], y[0], 1e-5, 1e-6));
        if (sums) {
          EXPECT_TRUE(fresco::test::all_close(sm[1], sm[0], 1e-5, 1e-4));
        }
      }
}

// The optional sums output (ops.h): the per-channel sum and sum of squares of y as written, from the
// convolution's own output, the same y as without it; refused with a bias or of the wrong size.
TEST(CpuConv2d, SumsOutputAddsUpTheOutputPerChannel) {
  const ConvShape shapes[] = {sq(5, 28, 28, 16, 32, 3, 1, 1, 1, 1), sq(3, 9, 9, 6, 6, 3, 2, 1, 1, 6),
                              sq(64, 8, 8, 8, 3, 1, 1, 0, 1, 1)};
  uint32_t seed = 450;
  for (const ConvShape& s : shapes) {
    SCOPED_TRACE(str(s));
    ConvData d(s, seed++);
    const std::vector<float> plain = run_conv(d, false);
    std::vector<float> y(static_cast<size_t>(s.y_size()), kNaN), sums(static_cast<size_t>(2 * s.k), kNaN);
    OpCall c(FR_OP_CONV2D);
    c.in(d.xt()).in(d.wt()).out(tensor(y, {s.n, s.p(), s.q(), s.k})).out(tensor(sums, {2 * s.k}));
    c.params(params_of(s, false));
    ASSERT_TRUE(c.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(y, plain));
    const std::vector<double> want = fresco::ref::channel_sums(fresco::test::to_double(y), s.k);
    for (int64_t k = 0; k < s.k; ++k) {  // added in double, rounded once: within float rounding
      const auto i = static_cast<size_t>(k), j = static_cast<size_t>(s.k + k);
      EXPECT_NEAR(sums[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-9) << "channel " << k;
      EXPECT_NEAR(sums[j], want[j], 1e-6 * want[j]) << "channel " << k;
    }
  }
  const ConvShape s = sq(2, 6, 6, 4, 6, 3, 1, 1, 1, 1);
  ConvData d(s, 470);
  std::vector<float> y(static_cast<size_t>(s.y_size())), sums(static_cast<size_t>(2 * s.k)),
      short_sums(static_cast<size_t>(s.k));
  OpCall with_bias(FR_OP_CONV2D);
  with_bias.in(d.xt()).in(d.wt()).in(d.bt()).out(tensor(y, {s.n, s.p(), s.q(), s.k}));
  with_bias.out(tensor(sums, {2 * s.k})).params(params_of(s, true));
  EXPECT_TRUE(fresco::test::contains(with_bias.run_error(), "without a bias")) << with_bias.run_error();
  OpCall short_out(FR_OP_CONV2D);
  short_out.in(d.xt()).in(d.wt()).out(tensor(y, {s.n, s.p(), s.q(), s.k}));
  short_out.out(tensor(short_sums, {s.k})).params(params_of(s, false));
  EXPECT_TRUE(fresco::test::contains(short_out.run_error(), "2K")) << short_out.run_error();
}

TEST(CpuConv2d, BadInputsReturnErrors) {
  const ConvShape s = sq(2, 6, 6, 4, 6, 3, 1, 1, 1, 2);
  ConvData d(s, 500);
  std::vector<float> y(static_cast<size_t>(s.y_size())), y_bad(static_cast<size_t>(s.n * 5 * 5 * s.k));
  std::vector<float> w_bad(static_cast<size_t>(s.k * 9 * s.c));  // C, not C/groups, input channels
  auto err = [&](const FrConvParams& p, bool good_out = true, bool good_w = true) {
    OpCall c(FR_OP_CONV2D);
    c.in(d.xt()).in(good_w ? d.wt() : tensor(w_bad, {s.k, 3, 3, s.c}));
    if (p.has_bias) c.in(d.bt());
    c.out(good_out ? tensor(y, {s.n, s.p(), s.q(), s.k}) : tensor(y_bad, {s.n, 5, 5, s.k})).params(p);
    return c.run_error();
  };
  const FrConvParams good = params_of(s, true);
  EXPECT_EQ(err(good), "");
  EXPECT_TRUE(fresco::test::contains(err(good, false), "output shape")) << err(good, false);
  EXPECT_TRUE(fresco::test::contains(err(good, true, false), "weight")) << err(good, true, false);
  FrConvParams p3 = good;
  p3.groups = 3;  // C = 4 is not a multiple of 3
  EXPECT_TRUE(fresco::test::contains(err(p3), "multiples of groups")) << err(p3);
  FrConvParams p4 = good;
  p4.groups = 4;  // C = 4 divides, K = 6 does not
  EXPECT_TRUE(fresco::test::contains(err(p4), "multiples of groups")) << err(p4);
  FrConvParams p0 = good;
  p0.stride_h = 0;
  EXPECT_TRUE(fresco::test::contains(err(p0), "invalid")) << err(p0);
  FrConvParams pk = good;
  pk.kh = pk.kw = 9, pk.pad_h = pk.pad_w = 0;  // kernel larger than the image
  EXPECT_TRUE(fresco::test::contains(err(pk), "larger")) << err(pk);
  {
    OpCall c(FR_OP_CONV2D);
    const int32_t short_params = 3;
    c.in(d.xt()).in(d.wt()).out(tensor(y, {s.n, s.p(), s.q(), s.k})).raw_params(&short_params, 4);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_CONV2D);  // has_bias, no bias tensor
    c.in(d.xt()).in(d.wt()).out(tensor(y, {s.n, s.p(), s.q(), s.k})).params(good);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
}

TEST(CpuConv2dBackward, BadInputsReturnErrors) {
  const ConvShape s = sq(2, 6, 6, 4, 6, 3, 1, 1, 1, 2);
  ConvData d(s, 600);
  std::vector<float> dy(static_cast<size_t>(s.y_size()), 1.0f), dw(static_cast<size_t>(s.w_size())),
      db(static_cast<size_t>(s.k)), dx(static_cast<size_t>(s.x_size())), small(7);
  const FrConvParams cp = params_of(s, true);
  auto base = [&] {
    OpCall c(FR_OP_CONV2D_BACKWARD);
    c.in(tensor(dy, {s.n, s.p(), s.q(), s.k})).in(d.xt()).in(d.wt());
    return c;
  };
  {
    OpCall c = base();
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).out(tensor(dx, {s.n, s.h, s.w, s.c}));
    c.params(FrConvBackwardParams{cp, 1, 0});
    EXPECT_EQ(c.run_error(), "");
  }
  {
    OpCall c = base();
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).params(cp);  // FrConvParams, too short
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c = base();  // need_dx without a dx output
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).params(FrConvBackwardParams{cp, 1, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c = base();  // dx of the wrong size
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).out(tensor(small, {1, 1, 1, 7}));
    c.params(FrConvBackwardParams{cp, 1, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "dx")) << c.run_error();
  }
  {
    OpCall c = base();  // db of the wrong size
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(small, {1, 1, 1, 7})).params(FrConvBackwardParams{cp, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "db")) << c.run_error();
  }
  {
    OpCall c = base();  // part 3 does not exist
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).params(FrConvBackwardParams{cp, 0, 3});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "part must be 0, 1 or 2")) << c.run_error();
  }
  {
    OpCall c = base();  // the input-gradient part of a layer that needs none
    c.out(tensor(dx, {s.n, s.h, s.w, s.c})).params(FrConvBackwardParams{cp, 0, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "needs need_dx")) << c.run_error();
  }
  {
    OpCall c(FR_OP_CONV2D_BACKWARD);  // dy with the wrong spatial size
    c.in(tensor(dy.data(), {s.n, s.p(), s.q() - 1, s.k})).in(d.xt()).in(d.wt());
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).params(FrConvBackwardParams{cp, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "output shape")) << c.run_error();
  }
  {
    OpCall c = base();  // groups 3 does not divide C = 4
    FrConvParams p3 = cp;
    p3.groups = 3;
    c.out(tensor(dw, {s.k, 3, 3, 2})).out(tensor(db, {1, 1, 1, s.k})).params(FrConvBackwardParams{p3, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "multiples of groups")) << c.run_error();
  }
}

}  // namespace
