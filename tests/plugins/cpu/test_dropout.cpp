// Conformance of the CPU dropout and dropout_backward kernels: the mask equals the Philox definition of ops.h
// (seed, layer, step, element index), the kept fraction is close to 1 - p, kept values are scaled by 1/(1-p),
// backward applies the identical mask (and matches finite differences), the same (seed, layer, step) repeats
// the mask while another step/layer/seed changes it, p = 0 is the identity, p = 1 drops all. Part of
// test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/dropout.h"
#include "reference/finite_difference.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

FrStepScalars scalars(uint64_t seed, int32_t step) {
  FrStepScalars s{};
  s.lr = 0.1f;
  s.loss_scale = 1.0f;
  s.step = step;
  s.seed_lo = static_cast<uint32_t>(seed);
  s.seed_hi = static_cast<uint32_t>(seed >> 32);
  return s;
}

// Runs dropout (or its backward) of x under scalars s.
std::vector<float> run_dropout(const char* op, std::vector<float>& x, float p, uint32_t layer,
                               FrStepScalars s) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size(), kNaN);
  OpCall c(op);
  c.in(tensor(x, {n, 1, 1, 1})).out(tensor(y, {n, 1, 1, 1})).rin(fresco::test::pod_range(s));
  c.params(FrDropoutParams{p, layer});
  EXPECT_TRUE(c.run());
  return y;
}

std::vector<bool> kept(const std::vector<float>& y) {
  std::vector<bool> k(y.size());
  for (size_t i = 0; i < y.size(); ++i) k[i] = y[i] != 0.0f;
  return k;
}

TEST(CpuDropout, MaskIsThePhiloxDefinition) {
  const size_t sizes[] = {1, 3, 37, 1001, 3 * 4097};
  const float ps[] = {0.1f, 0.5f, 0.9f};
  std::mt19937 rng(21);
  const uint64_t seed = 0x0123456789ABCDEFull;
  for (size_t n : sizes)
    for (float p : ps) {
      SCOPED_TRACE("n=" + std::to_string(n) + " p=" + std::to_string(p));
      std::vector<float> x = fresco::test::random_away_from_zero(rng, n, 0.01f, 2.0f);
      const std::vector<float> y = run_dropout(FR_OP_DROPOUT, x, p, 7, scalars(seed, 42));
      const std::vector<bool> keep = fresco::ref::dropout_mask(seed, 7, 42, n, p);
      EXPECT_EQ(kept(y), keep);
      EXPECT_TRUE(fresco::test::all_close(y, fresco::ref::dropout_apply(fresco::test::to_double(x), keep, p),
                                          1e-6, 0.0));
    }
}

TEST(CpuDropout, KeptFractionAndScale) {
  const size_t n = 200000;
  std::mt19937 rng(22);
  std::vector<float> x = fresco::test::random_away_from_zero(rng, n, 0.01f, 2.0f);
  for (float p : {0.1f, 0.3f, 0.5f, 0.8f}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    const std::vector<float> y = run_dropout(FR_OP_DROPOUT, x, p, 1, scalars(5, 0));
    size_t n_kept = 0;
    const double scale = 1.0 / (1.0 - static_cast<double>(p));
    for (size_t i = 0; i < n; ++i) {
      if (y[i] == 0.0f) continue;
      ++n_kept;
      ASSERT_NEAR(y[i], x[i] * scale, 1e-6 * std::fabs(x[i] * scale)) << "element " << i;
    }
    const double frac = static_cast<double>(n_kept) / static_cast<double>(n);
    const double sigma = std::sqrt(static_cast<double>(p) * (1.0 - p) / static_cast<double>(n));
    EXPECT_NEAR(frac, 1.0 - p, 5.0 * sigma);
  }
}

TEST(CpuDropout, BackwardUsesTheIdenticalMask) {
  const size_t n = 5003;
  std::mt19937 rng(23);
  std::vector<float> x = fresco::test::random_away_from_zero(rng, n, 0.01f, 2.0f);
  std::vector<float> dy = fresco::test::random_away_from_zero(rng, n, 0.01f, 1.0f);
  const float p = 0.4f;
  const FrStepScalars s = scalars(77, 13);
  const std::vector<float> y = run_dropout(FR_OP_DROPOUT, x, p, 3, s);
  const std::vector<float> dx = run_dropout(FR_OP_DROPOUT_BACKWARD, dy, p, 3, s);
  EXPECT_EQ(kept(dx), kept(y));
  const std::vector<double> expected = fresco::ref::dropout_apply(fresco::test::to_double(dy), kept(y), p);
  EXPECT_TRUE(fresco::test::all_close(dx, expected, 1e-6, 0.0));
}

TEST(CpuDropout, BackwardFiniteDifferences) {
  // L(x) = sum(dropout(x) * R) for the mask of (seed, layer, step): the kernel's backward of dy = R must
  // match the numerical gradient of the reference forward.
  for (size_t n : {size_t{3}, size_t{37}, size_t{401}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::mt19937 rng(static_cast<uint32_t>(24 + n));
    const float p = 0.3f;
    const FrStepScalars s = scalars(1234, 5);
    std::vector<float> r = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
    std::vector<double> x = fresco::test::to_double(fresco::test::random_floats(rng, n, -1.0f, 1.0f));
    const std::vector<bool> keep = fresco::ref::dropout_mask(1234, 9, 5, n, p);
    const std::vector<double> rd = fresco::test::to_double(r);
    auto loss = [&](const std::vector<double>& v) {
      const std::vector<double> y = fresco::ref::dropout_apply(v, keep, p);
      double l = 0.0;
      for (size_t i = 0; i < n; ++i) l += y[i] * rd[i];
      return l;
    };
    const std::vector<float> dx = run_dropout(FR_OP_DROPOUT_BACKWARD, r, p, 9, s);
    const auto idx = fresco::ref::check_indices(n, 500);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, x, idx)));
  }
}

TEST(CpuDropout, MaskDependsOnSeedLayerAndStepOnly) {
  const size_t n = 4099;
  std::mt19937 rng(25);
  std::vector<float> x = fresco::test::random_away_from_zero(rng, n, 0.01f, 2.0f);
  const float p = 0.5f;
  const std::vector<bool> base = kept(run_dropout(FR_OP_DROPOUT, x, p, 2, scalars(99, 10)));
  EXPECT_EQ(kept(run_dropout(FR_OP_DROPOUT, x, p, 2, scalars(99, 10))), base) << "same (seed, layer, step)";
  std::vector<float> other_x = fresco::test::random_away_from_zero(rng, n, 0.01f, 2.0f);
  EXPECT_EQ(kept(run_dropout(FR_OP_DROPOUT, other_x, p, 2, scalars(99, 10))), base) << "the mask ignores x";
  FrStepScalars other_fields = scalars(99, 10);
  other_fields.lr = 3.0f;
  other_fields.epoch = 4;
  EXPECT_EQ(kept(run_dropout(FR_OP_DROPOUT, x, p, 2, other_fields)), base)
      << "lr/epoch do not enter the mask";
  EXPECT_NE(kept(run_dropout(FR_OP_DROPOUT, x, p, 2, scalars(99, 11))), base) << "another step";
  EXPECT_NE(kept(run_dropout(FR_OP_DROPOUT, x, p, 3, scalars(99, 10))), base) << "another layer";
  EXPECT_NE(kept(run_dropout(FR_OP_DROPOUT, x, p, 2, scalars(100, 10))), base) << "another seed (low word)";
  EXPECT_NE(kept(run_dropout(FR_OP_DROPOUT, x, p, 2, scalars(99 + (1ull << 32), 10))), base)
      << "another seed (high word)";
}

TEST(CpuDropout, PZeroIsIdentityAndPOneDropsAll) {
  std::mt19937 rng(26);
  std::vector<float> x = fresco::test::random_floats(rng, 1003, -3.0f, 3.0f);
  EXPECT_TRUE(fresco::test::bitwise_equal(run_dropout(FR_OP_DROPOUT, x, 0.0f, 1, scalars(8, 2)), x));
  EXPECT_TRUE(fresco::test::bitwise_equal(run_dropout(FR_OP_DROPOUT_BACKWARD, x, 0.0f, 1, scalars(8, 2)), x));
  const std::vector<float> y = run_dropout(FR_OP_DROPOUT, x, 1.0f, 1, scalars(8, 2));
  for (float v : y) ASSERT_EQ(v, 0.0f);
}

TEST(CpuDropout, BadInputsReturnErrors) {
  std::vector<float> x(16, 1.0f), y(16), y17(17);
  FrStepScalars s = scalars(1, 1);
  {
    OpCall c(FR_OP_DROPOUT);  // no step scalars
    c.in(tensor(x, {16, 1, 1, 1})).out(tensor(y, {16, 1, 1, 1})).params(FrDropoutParams{0.5f, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_DROPOUT);  // scalars range too small
    c.in(tensor(x, {16, 1, 1, 1})).out(tensor(y, {16, 1, 1, 1})).rin(fresco::test::range(&s, 8, FR_U8));
    c.params(FrDropoutParams{0.5f, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "too small")) << c.run_error();
  }
  {
    OpCall c(FR_OP_DROPOUT_BACKWARD);  // params of the wrong size
    const float p = 0.5f;
    c.in(tensor(x, {16, 1, 1, 1})).out(tensor(y, {16, 1, 1, 1})).rin(fresco::test::pod_range(s));
    c.raw_params(&p, sizeof(p));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_DROPOUT);  // sizes differ
    c.in(tensor(x, {16, 1, 1, 1})).out(tensor(y17, {17, 1, 1, 1})).rin(fresco::test::pod_range(s));
    c.params(FrDropoutParams{0.5f, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  }
}

}  // namespace
