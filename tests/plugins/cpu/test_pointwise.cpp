// Conformance of the CPU silu, sigmoid and tanh kernels: forward against the double references on odd sizes
// (including the float range's saturating ends), backward against central finite differences of
// L = sum(f(x) * R) (silu's backward reads x, sigmoid's and tanh's read y), dx written over dy, bitwise
// determinism, mismatched sizes. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/finite_difference.h"
#include "reference/pointwise.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;
using fresco::test::to_double;
using Ref = std::function<std::vector<double>(const std::vector<double>&)>;

struct Op {
  const char* fwd;
  const char* bwd;
  bool backward_reads_output;
  Ref ref;
};

const Op kOps[] = {
    {FR_OP_SILU, FR_OP_SILU_BACKWARD, false, [](const auto& x) { return fresco::ref::silu(x); }},
    {FR_OP_SIGMOID, FR_OP_SIGMOID_BACKWARD, true, [](const auto& x) { return fresco::ref::sigmoid(x); }},
    {FR_OP_TANH, FR_OP_TANH_BACKWARD, true, [](const auto& x) { return fresco::ref::tanh(x); }},
};

std::vector<float> run(const char* op, std::vector<float>& a, std::vector<float>* b = nullptr) {
  const auto n = static_cast<int64_t>(a.size());
  std::vector<float> y(a.size(), std::numeric_limits<float>::quiet_NaN());
  OpCall c(op);
  c.in(tensor(a, {n, 1, 1, 1}));
  if (b) c.in(tensor(*b, {n, 1, 1, 1}));
  c.out(tensor(y, {n, 1, 1, 1}));
  EXPECT_TRUE(c.run()) << op;
  return y;
}

class CpuPointwise : public ::testing::TestWithParam<int> {};

TEST_P(CpuPointwise, ForwardMatchesReference) {
  const Op& op = kOps[GetParam()];
  std::mt19937 rng(51);
  for (int64_t n : {1, 3, 37, 32768 + 5}) {
    SCOPED_TRACE(std::string(op.fwd) + " n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -6.0f, 6.0f);
    if (n == 3) x = {-88.0f, 0.0f, 60.0f};  // saturating ends stay finite
    const std::vector<float> y = run(op.fwd, x);
    EXPECT_TRUE(fresco::test::all_close(y, op.ref(to_double(x)), 2e-6, 1e-7));
  }
}

TEST_P(CpuPointwise, BackwardFiniteDifferencesAndInPlace) {
  const Op& op = kOps[GetParam()];
  std::mt19937 rng(52);
  for (int64_t n : {1, 37, 513}) {
    SCOPED_TRACE(std::string(op.bwd) + " n=" + std::to_string(n));
    std::vector<float> x = fresco::test::random_floats(rng, static_cast<size_t>(n), -4.0f, 4.0f);
    std::vector<float> r = fresco::test::random_floats(rng, static_cast<size_t>(n), -1.0f, 1.0f);
    std::vector<float> saved = op.backward_reads_output ? run(op.fwd, x) : x;
    const std::vector<float> dx = run(op.bwd, r, &saved);
    std::vector<double> xd = to_double(x);
    const std::vector<double> rd = to_double(r);
    auto loss = [&](const std::vector<double>& p) {
      const std::vector<double> y = op.ref(p);
      return std::inner_product(y.begin(), y.end(), rd.begin(), 0.0);
    };
    const auto idx = fresco::ref::check_indices(xd.size(), 600);
    EXPECT_TRUE(fresco::test::grad_check(dx, idx, fresco::ref::numeric_gradient(loss, xd, idx, 1e-4)));
    OpCall c(op.bwd);  // dx over dy
    c.in(tensor(r, {n, 1, 1, 1})).in(tensor(saved, {n, 1, 1, 1})).out(tensor(r, {n, 1, 1, 1}));
    ASSERT_TRUE(c.run());
    EXPECT_TRUE(fresco::test::bitwise_equal(r, dx));
  }
}

TEST_P(CpuPointwise, DeterministicAndBadInputs) {
  const Op& op = kOps[GetParam()];
  std::mt19937 rng(53);
  std::vector<float> x = fresco::test::random_floats(rng, 70001, -5.0f, 5.0f);
  EXPECT_TRUE(fresco::test::bitwise_equal(run(op.fwd, x), run(op.fwd, x)));
  std::vector<float> a(8), b(9), y(8);
  OpCall c(op.fwd);
  c.in(tensor(a, {8, 1, 1, 1})).out(tensor(b, {9, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  OpCall d(op.bwd);
  d.in(tensor(a, {8, 1, 1, 1})).in(tensor(b, {9, 1, 1, 1})).out(tensor(y, {8, 1, 1, 1}));
  EXPECT_TRUE(fresco::test::contains(d.run_error(), "sizes differ")) << d.run_error();
}

INSTANTIATE_TEST_SUITE_P(Ops, CpuPointwise, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(kOps[i.param].fwd);
                         });

}  // namespace
