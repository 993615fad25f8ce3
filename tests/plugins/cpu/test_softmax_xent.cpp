// Conformance of the CPU softmax_xent kernel (fused loss + gradient, mean reduction, PyTorch label
// smoothing): loss, top-1 count and batch size in FrBatchResults and the gradient against the double
// reference for label smoothing 0 / 0.1 / 0.2 and odd shapes; the gradient against central finite differences
// of the reference loss; stability for huge logits; write_grad 0 leaves the gradient buffer untouched; an
// out-of-range label returns an error (not a crash); bad dtypes/arity/params return errors. Part of
// test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/finite_difference.h"
#include "reference/softmax_xent.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kSentinel = -12345.0f;

struct XentCase {
  int64_t m, c;
};

struct XentData {
  int64_t m, c;
  std::vector<float> z;
  std::vector<int32_t> labels;
  XentData(int64_t rows, int64_t classes, uint32_t seed, float spread = 4.0f) : m(rows), c(classes) {
    std::mt19937 rng(seed);
    z = fresco::test::random_floats(rng, static_cast<size_t>(m * c), -spread, spread);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c - 1));
    labels.resize(static_cast<size_t>(m));
    for (auto& l : labels) l = pick(rng);
  }
};

struct XentOut {
  FrBatchResults results{};
  std::vector<float> dz;
};

// Runs softmax_xent; with `grad_buffer` the gradient tensor is passed even when write_grad is 0.
XentOut run_xent(XentData& d, float eps, bool write_grad, bool grad_buffer = true) {
  XentOut o;
  o.results = FrBatchResults{kSentinel, kSentinel, kSentinel, 0.0f};
  o.dz.assign(d.z.size(), kSentinel);
  OpCall c(FR_OP_SOFTMAX_XENT);
  c.in(tensor(d.z, {d.m, 1, 1, d.c})).in(tensor(d.labels, {d.m, 1, 1, 1}));
  if (grad_buffer) c.out(tensor(o.dz, {d.m, 1, 1, d.c}));
  c.rout(fresco::test::pod_range(o.results)).params(FrSoftmaxXentParams{eps, write_grad ? 1 : 0});
  EXPECT_TRUE(c.run());
  return o;
}

const XentCase kCases[] = {{1, 2}, {1, 10}, {3, 10}, {37, 10}, {128, 100}, {5, 1000}, {300, 7}, {2, 1}};
const float kSmoothings[] = {0.0f, 0.1f, 0.2f};

TEST(CpuSoftmaxXent, LossTop1AndGradientMatchReference) {
  uint32_t seed = 41;
  for (const XentCase& k : kCases)
    for (float eps : kSmoothings) {
      SCOPED_TRACE("M=" + std::to_string(k.m) + " C=" + std::to_string(k.c) + " eps=" + std::to_string(eps));
      XentData d(k.m, k.c, seed++);
      const XentOut o = run_xent(d, eps, true);
      const std::vector<double> zd = fresco::test::to_double(d.z);
      const double loss = fresco::ref::softmax_xent_loss(zd, d.labels, d.m, d.c, eps);
      EXPECT_NEAR(o.results.loss, loss, 1e-5 * std::fabs(loss) + 1e-6);
      EXPECT_EQ(o.results.correct, static_cast<float>(fresco::ref::top1_hits(zd, d.labels, d.m, d.c)));
      EXPECT_EQ(o.results.samples, static_cast<float>(d.m));
      const std::vector<double> g = fresco::ref::softmax_xent_grad(zd, d.labels, d.m, d.c, eps);
      EXPECT_TRUE(fresco::test::all_close(o.dz, g, 1e-5, 1e-7 / static_cast<double>(d.m)));
    }
}

TEST(CpuSoftmaxXent, GradientFiniteDifferences) {
  const XentCase cases[] = {{1, 10}, {3, 10}, {37, 10}, {4, 257}};
  uint32_t seed = 51;
  for (const XentCase& k : cases)
    for (float eps : kSmoothings) {
      SCOPED_TRACE("M=" + std::to_string(k.m) + " C=" + std::to_string(k.c) + " eps=" + std::to_string(eps));
      XentData d(k.m, k.c, seed++);
      const XentOut o = run_xent(d, eps, true);
      std::vector<double> zd = fresco::test::to_double(d.z);
      auto loss = [&](const std::vector<double>& z) {
        return fresco::ref::softmax_xent_loss(z, d.labels, d.m, d.c, eps);
      };
      const auto idx = fresco::ref::check_indices(zd.size(), 400);
      EXPECT_TRUE(fresco::test::grad_check(o.dz, idx, fresco::ref::numeric_gradient(loss, zd, idx, 1e-4)));
    }
}

TEST(CpuSoftmaxXent, KnownValues) {
  // Equal logits: softmax is uniform, so the loss is log(C) for any smoothing and the first class wins every
  // tie.
  XentData d(6, 5, 61);
  std::fill(d.z.begin(), d.z.end(), 0.25f);
  d.labels = {0, 1, 2, 3, 4, 0};
  for (float eps : kSmoothings) {
    const XentOut o = run_xent(d, eps, true);
    EXPECT_NEAR(o.results.loss, std::log(5.0), 1e-6);
    EXPECT_EQ(o.results.correct, 2.0f);
    EXPECT_NEAR(o.dz[1], (0.2 - eps / 5.0) / 6.0, 1e-7);                // row 0, not the label
    EXPECT_NEAR(o.dz[0], (0.2 - (1.0 - eps) - eps / 5.0) / 6.0, 1e-7);  // row 0, its label
  }
}

TEST(CpuSoftmaxXent, HugeLogitsStayFinite) {
  XentData d(37, 10, 62, 50.0f);
  for (auto& v : d.z) v += 1000.0f;
  for (float eps : kSmoothings) {
    const XentOut o = run_xent(d, eps, true);
    const std::vector<double> zd = fresco::test::to_double(d.z);
    const double loss = fresco::ref::softmax_xent_loss(zd, d.labels, d.m, d.c, eps);
    ASSERT_TRUE(std::isfinite(o.results.loss));
    EXPECT_NEAR(o.results.loss, loss, 1e-4 * std::fabs(loss) + 1e-5);
    EXPECT_TRUE(fresco::test::all_close(o.dz, fresco::ref::softmax_xent_grad(zd, d.labels, d.m, d.c, eps),
                                        1e-4, 1e-6));
  }
}

TEST(CpuSoftmaxXent, WriteGradZeroLeavesGradientUntouched) {
  XentData d(37, 10, 63);
  const std::vector<double> zd = fresco::test::to_double(d.z);
  for (float eps : kSmoothings) {
    const XentOut o = run_xent(d, eps, false);
    EXPECT_TRUE(fresco::test::bitwise_equal(o.dz, std::vector<float>(d.z.size(), kSentinel)));
    EXPECT_NEAR(o.results.loss, fresco::ref::softmax_xent_loss(zd, d.labels, d.m, d.c, eps), 1e-5);
    EXPECT_EQ(o.results.samples, 37.0f);
    const XentOut no_buffer = run_xent(d, eps, false, false);  // evaluation graphs pass no gradient tensor
    EXPECT_EQ(no_buffer.results.loss, o.results.loss);
    EXPECT_EQ(no_buffer.results.correct, o.results.correct);
  }
}

TEST(CpuSoftmaxXent, OutOfRangeLabelReturnsError) {
  for (int32_t bad : {-1, 10, 1 << 30}) {
    SCOPED_TRACE("label " + std::to_string(bad));
    XentData d(37, 10, 64);
    d.labels[17] = bad;
    std::vector<float> dz(d.z.size());
    FrBatchResults r{};
    OpCall c(FR_OP_SOFTMAX_XENT);
    c.in(tensor(d.z, {37, 1, 1, 10})).in(tensor(d.labels, {37, 1, 1, 1})).out(tensor(dz, {37, 1, 1, 10}));
    c.rout(fresco::test::pod_range(r)).params(FrSoftmaxXentParams{0.1f, 1});
    const std::string e = c.run_error();
    EXPECT_TRUE(fresco::test::contains(e, "label of row 17")) << e;
  }
}

TEST(CpuSoftmaxXent, BadInputsReturnErrors) {
  XentData d(4, 3, 65);
  std::vector<float> dz(12), labels_f32(4);
  std::vector<int32_t> three_labels(3, 0);
  FrBatchResults r{};
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // f32 labels
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(labels_f32, {4, 1, 1, 1})).out(tensor(dz, {4, 1, 1, 3}));
    c.rout(fresco::test::pod_range(r)).params(FrSoftmaxXentParams{0.0f, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "dtype")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // fewer labels than rows
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(three_labels, {3, 1, 1, 1})).out(tensor(dz, {4, 1, 1, 3}));
    c.rout(fresco::test::pod_range(r)).params(FrSoftmaxXentParams{0.0f, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "fewer labels")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // write_grad without a gradient tensor
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(d.labels, {4, 1, 1, 1}));
    c.rout(fresco::test::pod_range(r)).params(FrSoftmaxXentParams{0.0f, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "no gradient output")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // a gradient tensor smaller than the logits
    std::vector<float> small(8);
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(d.labels, {4, 1, 1, 1})).out(tensor(small, {4, 1, 1, 2}));
    c.rout(fresco::test::pod_range(r)).params(FrSoftmaxXentParams{0.0f, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "M x C values")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // results range too small
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(d.labels, {4, 1, 1, 1})).out(tensor(dz, {4, 1, 1, 3}));
    c.rout(fresco::test::range(&r, 8, FR_U8)).params(FrSoftmaxXentParams{0.0f, 1});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "too small")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // no results range
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(d.labels, {4, 1, 1, 1})).out(tensor(dz, {4, 1, 1, 3}));
    c.params(FrSoftmaxXentParams{0.0f, 1});
    const std::string e = c.run_error();
    EXPECT_TRUE(fresco::test::contains(e, "prepare softmax_xent") &&
                fresco::test::contains(e, "expected at least"))
        << e;
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);  // params of the wrong size
    const float eps = 0.1f;
    c.in(tensor(d.z, {4, 1, 1, 3})).in(tensor(d.labels, {4, 1, 1, 1})).out(tensor(dz, {4, 1, 1, 3}));
    c.rout(fresco::test::pod_range(r)).raw_params(&eps, sizeof(eps));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
}

}  // namespace
