// The batchnorm prologue forms of the CPU kernels (ops.h, "Batchnorm prologue"): conv2d with the four
// prologue operands writes the applied map relu(fma(x, scale, shift)) (computed here with one float fma) as
// its second output and gives the bits it gives on that map, before its sums when it has them; the
// statistics-only batchnorm gives the full form's statistics; conv2d_backward's batchnorm gradient epilogue
// gives the masking pass's masked gradient and sums; its weight gradient's batchnorm prologue gives the plain
// weight gradient of the batchnorm's dx; the join prologue adds its residual before the relu; malformed forms
// are refused. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kN = 2, kH = 6, kW = 5, kC = 8, kK = 6;

struct Data {
  std::vector<float> x, w, gamma, beta, mean, invstd, applied;
  explicit Data(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](std::vector<float>& v, size_t n, float scale, float offset = 0.0f) {
      v.resize(n);
      for (float& f : v) f = offset + scale * u(rng);
    };
    fill(x, kN * kH * kW * kC, 2.0f);
    fill(w, kK * 9 * kC, 0.3f);
    fill(gamma, kC, 1.5f);
    fill(beta, kC, 0.5f, 0.2f);
    fill(mean, kC, 0.5f);
    fill(invstd, kC, 0.5f, 1.0f);
    applied.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = i % kC;
      const float scale = gamma[c] * invstd[c], shift = std::fma(-mean[c], scale, beta[c]);
      const float v = std::fma(x[i], scale, shift);
      applied[i] = v > 0.0f ? v : 0.0f;
    }
  }
  FrTensor map(std::vector<float>& v) { return tensor(v, {kN, kH, kW, kC}); }
  FrTensor vec(std::vector<float>& v) { return tensor(v, {kC}); }
  OpCall& prologue(OpCall& c) { return c.in(vec(gamma)).in(vec(beta)).in(vec(mean)).in(vec(invstd)); }
};

const FrConvParams kConv{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};

TEST(CpuConvPrologue, ConvWritesAndConvolvesTheAppliedMap) {
  Data d(3);
  for (bool sums : {false, true}) {
    auto forward = [&](std::vector<float>& x, bool pro, std::vector<float>& applied, std::vector<float>& s2) {
      std::vector<float> y(kN * kH * kW * kK, kNaN);
      OpCall c(FR_OP_CONV2D);
      c.in(d.map(x)).in(tensor(d.w, {kK, 3, 3, kC}));
      if (pro) d.prologue(c);
      c.out(tensor(y, {kN, kH, kW, kK}));
      if (pro) c.out(d.map(applied));
      if (sums) c.out(tensor(s2, {2 * kK}));
      c.params(kConv);
      EXPECT_TRUE(c.run());
      return y;
    };
    std::vector<float> applied(d.x.size(), kNaN), unused, sums_fused(2 * kK, kNaN), sums_plain(2 * kK, kNaN);
    EXPECT_EQ(forward(d.x, true, applied, sums_fused), forward(d.applied, false, unused, sums_plain));
    EXPECT_EQ(applied, d.applied);
    if (sums) {
      EXPECT_EQ(sums_fused, sums_plain);
    }
  }
}

TEST(CpuConvPrologue, BatchnormFormsMatchTheirFullForms) {
  Data d(4);
  // statistics only: the same saved and running statistics as with y
  std::vector<float> stats[2][4];  // [form][mean, invstd, running mean, running var]
  for (int form = 0; form < 2; ++form) {
    auto& s = stats[form];
    s[0].assign(kC, kNaN), s[1].assign(kC, kNaN), s[2].assign(kC, 0.1f), s[3].assign(kC, 2.0f);
    std::vector<float> y(d.x.size(), kNaN);
    OpCall c(FR_OP_BATCHNORM);
    c.in(d.map(d.x)).in(d.vec(d.gamma)).in(d.vec(d.beta));
    if (form == 0) c.out(d.map(y));
    c.out(d.vec(s[0])).out(d.vec(s[1])).rout(fresco::test::range(s[2])).rout(fresco::test::range(s[3]));
    c.params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
    ASSERT_TRUE(c.run());
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stats[0][i], stats[1][i]) << "statistic " << i;
}

// The input gradient's batchnorm epilogue (ops.h): conv2d_backward part 1 with bx and the four batchnorm
// operands gives the plain input gradient masked by x > 0 and the gradient sums the masking pass
// (relu_backward with gsums) gives from it, bit for bit (the same chunks and order); malformed forms are
// refused.
TEST(CpuConvPrologue, InputGradientEpilogueMasksAndSums) {
  Data d(6);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> dy(kN * kH * kW * kK);
  for (float& f : dy) f = u(rng);
  const FrConvBackwardParams part1{kConv, 1, 1};
  std::vector<float> dx_plain(d.x.size(), kNaN), dx_masked(d.x.size(), kNaN), sums_pass(2 * kC, kNaN);
  OpCall plain(FR_OP_CONV2D_BACKWARD);
  plain.in(tensor(dy, {kN, kH, kW, kK})).in(d.map(d.applied)).in(tensor(d.w, {kK, 3, 3, kC}));
  plain.out(d.map(dx_plain)).params(part1);
  ASSERT_TRUE(plain.run());
  OpCall mask(FR_OP_RELU_BACKWARD);  // the masking pass with gsums, over the batchnorm's input
  mask.in(d.map(dx_plain)).in(d.map(d.applied)).in(d.map(d.x)).in(d.vec(d.mean));
  mask.out(d.map(dx_masked)).out(tensor(sums_pass, {2 * kC}));
  ASSERT_TRUE(mask.run());
  std::vector<float> dx(d.x.size(), kNaN), sums(2 * kC, kNaN);
  OpCall fused(FR_OP_CONV2D_BACKWARD);
  fused.in(tensor(dy, {kN, kH, kW, kK})).in(d.map(d.applied)).in(tensor(d.w, {kK, 3, 3, kC})).in(d.map(d.x));
  d.prologue(fused).out(d.map(dx)).out(tensor(sums, {2 * kC})).params(part1);
  ASSERT_TRUE(fused.run());
  EXPECT_EQ(dx, dx_masked);
  EXPECT_EQ(sums, sums_pass);
  const size_t zeros = static_cast<size_t>(std::count(dx.begin(), dx.end(), 0.0f));
  EXPECT_GT(zeros, dx.size() / 10);  // the mask really masks
  EXPECT_LT(zeros, dx.size() - dx.size() / 10);
  // refused: no gsums output; bx of another shape; a part without dx
  OpCall no_sums(FR_OP_CONV2D_BACKWARD);
  no_sums.in(tensor(dy, {kN, kH, kW, kK}))
      .in(d.map(d.applied))
      .in(tensor(d.w, {kK, 3, 3, kC}))
      .in(d.map(d.x));
  d.prologue(no_sums).out(d.map(dx)).params(part1);
  EXPECT_NE(no_sums.run_error().find("conv2d_backward"), std::string::npos) << no_sums.run_error();
  OpCall reshaped(FR_OP_CONV2D_BACKWARD);  // bx with x's size but not its shape
  reshaped.in(tensor(dy, {kN, kH, kW, kK})).in(d.map(d.applied)).in(tensor(d.w, {kK, 3, 3, kC}));
  reshaped.in(tensor(d.x, {kN, kH, kC, kW}));
  d.prologue(reshaped).out(d.map(dx)).out(tensor(sums, {2 * kC})).params(part1);
  EXPECT_NE(reshaped.run_error().find("bx"), std::string::npos) << reshaped.run_error();
  std::vector<float> dw(kK * 9 * kC);
  OpCall weights(FR_OP_CONV2D_BACKWARD);
  weights.in(tensor(dy, {kN, kH, kW, kK}))
      .in(d.map(d.applied))
      .in(tensor(d.w, {kK, 3, 3, kC}))
      .in(d.map(d.x));
  d.prologue(weights).out(tensor(dw, {kK, 3, 3, kC})).out(tensor(sums, {2 * kC}));
  weights.params(FrConvBackwardParams{kConv, 0, 2});  // (read as the weight gradient's prologue: refused)
  EXPECT_NE(weights.run_error().find("gradient prologue"), std::string::npos) << weights.run_error();
}

// The weight gradient's batchnorm prologue (ops.h): conv2d_backward part 2 (and part 0 without dx) with y,
// the batchnorm's gamma, saved statistics and gradient sums gives the weight gradient of the plain call on
// the dx that batchnorm_backward (premasked, with gsums) writes, bit for bit; batchnorm_backward's
// weights-only form gives the full form's dgamma and dbeta; malformed forms are refused.
TEST(CpuConvPrologue, WeightGradientPrologueAppliesTheBatchnormsBackward) {
  Data d(9);
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t kRows = kN * kH * kW;
  std::vector<float> g(kRows * kK), y(kRows * kK), gamma(kK), mean(kK), invstd(kK), gsums(2 * kK);
  for (float& f : g) f = u(rng);
  for (float& f : y) f = 2.0f * u(rng);
  for (int64_t k = 0; k < kK; ++k) {
    gamma[k] = 1.0f + 0.5f * u(rng), mean[k] = 0.3f * u(rng), invstd[k] = 1.0f + 0.4f * u(rng);
    double sg = 0.0, sgx = 0.0;
    for (int64_t r = 0; r < kRows; ++r) sg += g[r * kK + k], sgx += g[r * kK + k] * (y[r * kK + k] - mean[k]);
    gsums[k] = static_cast<float>(sg), gsums[kK + k] = static_cast<float>(sgx);
  }
  auto ymap = [&](std::vector<float>& v) { return tensor(v, {kN, kH, kW, kK}); };
  auto kvec = [&](std::vector<float>& v) { return tensor(v, {static_cast<int64_t>(v.size())}); };
  // the batchnorm's backward in both forms
  std::vector<float> dx_bn(g.size(), kNaN), dgamma[2], dbeta[2];
  for (int form = 0; form < 2; ++form) {
    dgamma[form].assign(kK, kNaN), dbeta[form].assign(kK, kNaN);
    OpCall bnb(FR_OP_BATCHNORM_BACKWARD);
    bnb.in(ymap(g)).in(ymap(y)).in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd)).in(kvec(gsums));
    if (form == 0) bnb.out(ymap(dx_bn));
    bnb.out(kvec(dgamma[form])).out(kvec(dbeta[form])).params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
    ASSERT_TRUE(bnb.run()) << form;
  }
  EXPECT_EQ(dgamma[0], dgamma[1]);
  EXPECT_EQ(dbeta[0], dbeta[1]);
  for (int part : {2, 0}) {
    const FrConvBackwardParams p{kConv, 0, part};
    std::vector<float> dw_plain(kK * 9 * kC, kNaN), dw(kK * 9 * kC, kNaN);
    OpCall plain(FR_OP_CONV2D_BACKWARD);
    plain.in(ymap(dx_bn)).in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC}));
    plain.out(tensor(dw_plain, {kK, 3, 3, kC})).params(p);
    ASSERT_TRUE(plain.run());
    OpCall fused(FR_OP_CONV2D_BACKWARD);
    fused.in(ymap(g)).in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(ymap(y));
    fused.in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd)).in(kvec(gsums));
    fused.out(tensor(dw, {kK, 3, 3, kC})).params(p);
    ASSERT_TRUE(fused.run()) << fused.run_error();
    EXPECT_EQ(dw, dw_plain) << "part " << part;
  }
  // refused: gsums of C elements; y of x's shape; an extra output; the weights-only batchnorm without gsums
  std::vector<float> dw(kK * 9 * kC), short_sums(kK);
  OpCall short_gsums(FR_OP_CONV2D_BACKWARD);
  short_gsums.in(ymap(g)).in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(ymap(y));
  short_gsums.in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd)).in(kvec(short_sums));
  short_gsums.out(tensor(dw, {kK, 3, 3, kC})).params(FrConvBackwardParams{kConv, 0, 2});
  EXPECT_NE(short_gsums.run_error().find("gsums"), std::string::npos) << short_gsums.run_error();
  OpCall x_shaped(FR_OP_CONV2D_BACKWARD);
  x_shaped.in(ymap(g)).in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(d.map(d.x));
  x_shaped.in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd)).in(kvec(gsums));
  x_shaped.out(tensor(dw, {kK, 3, 3, kC})).params(FrConvBackwardParams{kConv, 0, 2});
  EXPECT_NE(x_shaped.run_error().find("gradient prologue's y"), std::string::npos) << x_shaped.run_error();
  std::vector<float> stray(2 * kK);
  OpCall extra(FR_OP_CONV2D_BACKWARD);
  extra.in(ymap(g)).in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(ymap(y));
  extra.in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd)).in(kvec(gsums));
  extra.out(tensor(dw, {kK, 3, 3, kC})).out(kvec(stray)).params(FrConvBackwardParams{kConv, 0, 2});
  EXPECT_NE(extra.run_error().find("writes 1 outputs"), std::string::npos) << extra.run_error();
  std::vector<float> dg(kK), db(kK);
  OpCall no_sums(FR_OP_BATCHNORM_BACKWARD);
  no_sums.in(ymap(g)).in(ymap(y)).in(kvec(gamma)).in(kvec(mean)).in(kvec(invstd));
  no_sums.out(kvec(dg)).out(kvec(db)).params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  EXPECT_NE(no_sums.run_error().find("weights-only"), std::string::npos) << no_sums.run_error();
}

// The join prologue (ops.h): with a fifth operand r, conv2d writes relu(fma(x, scale, shift) + r) (the sum
// in float, computed here one operation at a time) as its applied map and gives the bits it gives on that
// map; r of another shape or dtype is refused.
TEST(CpuConvPrologue, JoinPrologueAddsTheResidualBeforeTheRelu) {
  Data d(7);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> r(d.x.size()), joined(d.x.size());
  for (float& f : r) f = u(rng);
  for (size_t i = 0; i < d.x.size(); ++i) {
    const size_t c = i % kC;
    const float scale = d.gamma[c] * d.invstd[c], shift = std::fma(-d.mean[c], scale, d.beta[c]);
    const float v = std::fma(d.x[i], scale, shift) + r[i];
    joined[i] = v > 0.0f ? v : 0.0f;
  }
  const size_t zeros = static_cast<size_t>(std::count(joined.begin(), joined.end(), 0.0f));
  ASSERT_GT(zeros, joined.size() / 10);  // the relu really cuts
  ASSERT_LT(zeros, joined.size() - joined.size() / 10);
  std::vector<float> y(kN * kH * kW * kK, kNaN), applied(d.x.size(), kNaN), y_plain(y.size(), kNaN);
  OpCall fused(FR_OP_CONV2D);
  d.prologue(fused.in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC}))).in(d.map(r));
  fused.out(tensor(y, {kN, kH, kW, kK})).out(d.map(applied)).params(kConv);
  ASSERT_TRUE(fused.run()) << fused.run_error();
  EXPECT_EQ(applied, joined);
  OpCall plain(FR_OP_CONV2D);
  plain.in(d.map(joined))
      .in(tensor(d.w, {kK, 3, 3, kC}))
      .out(tensor(y_plain, {kN, kH, kW, kK}))
      .params(kConv);
  ASSERT_TRUE(plain.run());
  EXPECT_EQ(y, y_plain);
  OpCall reshaped(FR_OP_CONV2D);  // r with x's size but not its shape
  d.prologue(reshaped.in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC}))).in(tensor(r, {kN, kH, kC, kW}));
  reshaped.out(tensor(y, {kN, kH, kW, kK})).out(d.map(applied)).params(kConv);
  EXPECT_NE(reshaped.run_error().find("residual"), std::string::npos) << reshaped.run_error();
}

TEST(CpuConvPrologue, MalformedFormsAreRefused) {
  Data d(5);
  std::vector<float> y(kN * kH * kW * kK), applied(d.x.size());
  OpCall three(FR_OP_CONV2D);  // three of the four prologue operands
  three.in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(d.vec(d.gamma)).in(d.vec(d.beta)).in(d.vec(d.mean));
  three.out(tensor(y, {kN, kH, kW, kK})).out(d.map(applied)).params(kConv);
  EXPECT_NE(three.run_error().find("batchnorm prologue"), std::string::npos) << three.run_error();
  std::vector<float> short_gamma(kC - 1, 1.0f);
  OpCall wrong(FR_OP_CONV2D);
  wrong.in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})).in(tensor(short_gamma, {kC - 1}));
  wrong.in(d.vec(d.beta)).in(d.vec(d.mean)).in(d.vec(d.invstd));
  wrong.out(tensor(y, {kN, kH, kW, kK})).out(d.map(applied)).params(kConv);
  EXPECT_NE(wrong.run_error().find("gamma"), std::string::npos) << wrong.run_error();
  OpCall no_map(FR_OP_CONV2D);  // the applied map is required
  d.prologue(no_map.in(d.map(d.x)).in(tensor(d.w, {kK, 3, 3, kC})));
  no_map.out(tensor(y, {kN, kH, kW, kK})).params(kConv);
  EXPECT_NE(no_map.run_error().find("applied map"), std::string::npos) << no_map.run_error();
}

}  // namespace
