// Conformance of the CPU fc_softmax_xent kernel (the training head in one node): bitwise the same logits,
// loss, hits, dlogits and dx as the nodes it replaces (fc, softmax_xent, fc_backward part 1, then the relu
// mask of the layer before), with and without bias, mask and label smoothing, on odd shapes; bad labels, too
// many classes and missing tensors are errors. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "plugins/cpu/op_harness.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

constexpr float kPoison = -7777.0f;

struct Head {
  int64_t m, n, k;
  std::vector<float> x, w, b;
  std::vector<int32_t> labels;
  Head(int64_t rows, int64_t classes, int64_t inputs, uint32_t seed) : m(rows), n(classes), k(inputs) {
    std::mt19937 rng(seed);
    // x as after a relu: about half zeros, so the mask matters
    x = fresco::test::random_floats(rng, static_cast<size_t>(m * k), -1.0f, 1.0f);
    for (float& v : x) v = v > 0.0f ? v : 0.0f;
    w = fresco::test::random_floats(rng, static_cast<size_t>(n * k), -0.5f, 0.5f);
    b = fresco::test::random_floats(rng, static_cast<size_t>(n), -0.5f, 0.5f);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(n - 1));
    labels.resize(static_cast<size_t>(m));
    for (auto& l : labels) l = pick(rng);
  }
};

// Outputs for head h, poisoned so an element left unwritten shows.
struct HeadOut {
  std::vector<float> logits, dlogits, dx;
  FrBatchResults results{kPoison, kPoison, kPoison, 0.0f};
  explicit HeadOut(const Head& h)
      : logits(static_cast<size_t>(h.m * h.n), kPoison),
        dlogits(logits.size(), kPoison),
        dx(static_cast<size_t>(h.m * h.k), kPoison) {}
};

HeadOut fused(Head& h, bool bias, bool mask, float eps) {
  HeadOut o(h);
  OpCall c(FR_OP_FC_SOFTMAX_XENT);
  c.in(tensor(h.x, {h.m, 1, 1, h.k})).in(tensor(h.w, {h.n, 1, 1, h.k})).in(tensor(h.labels, {h.m, 1, 1, 1}));
  if (bias) c.in(tensor(h.b, {1, 1, 1, h.n}));
  c.out(tensor(o.logits, {h.m, 1, 1, h.n})).out(tensor(o.dlogits, {h.m, 1, 1, h.n}));
  c.out(tensor(o.dx, {h.m, 1, 1, h.k}));
  c.rout(fresco::test::pod_range(o.results));
  c.params(FrFcSoftmaxXentParams{bias ? 1 : 0, mask ? 1 : 0, eps, 0});
  EXPECT_TRUE(c.run());
  return o;
}

// The same through the separate nodes.
HeadOut separate(Head& h, bool bias, bool mask, float eps) {
  HeadOut o(h);
  {
    OpCall c(FR_OP_FC);
    c.in(tensor(h.x, {h.m, 1, 1, h.k})).in(tensor(h.w, {h.n, 1, 1, h.k}));
    if (bias) c.in(tensor(h.b, {1, 1, 1, h.n}));
    c.out(tensor(o.logits, {h.m, 1, 1, h.n})).params(FrFcParams{bias ? 1 : 0, 0});
    EXPECT_TRUE(c.run());
  }
  {
    OpCall c(FR_OP_SOFTMAX_XENT);
    c.in(tensor(o.logits, {h.m, 1, 1, h.n})).in(tensor(h.labels, {h.m, 1, 1, 1}));
    c.out(tensor(o.dlogits, {h.m, 1, 1, h.n})).rout(fresco::test::pod_range(o.results));
    c.params(FrSoftmaxXentParams{eps, 1});
    EXPECT_TRUE(c.run());
  }
  {
    OpCall c(FR_OP_FC_BACKWARD);
    c.in(tensor(o.dlogits, {h.m, 1, 1, h.n})).in(tensor(h.x, {h.m, 1, 1, h.k}));
    c.in(tensor(h.w, {h.n, 1, 1, h.k})).out(tensor(o.dx, {h.m, 1, 1, h.k}));
    c.params(FrFcBackwardParams{bias ? 1 : 0, 1, 0, 1});
    EXPECT_TRUE(c.run());
  }
  if (mask)
    for (size_t i = 0; i < o.dx.size(); ++i) o.dx[i] = h.x[i] > 0.0f ? o.dx[i] : 0.0f;
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuFcSoftmaxXent, SameBitsAsTheSeparateNodes) {
  uint32_t seed = 1;
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {37, 10, 70}, {128, 10, 256}, {65, 32, 33}})
    for (int bias = 0; bias < 2; ++bias)
      for (int mask = 0; mask < 2; ++mask)
        for (float eps : {0.0f, 0.1f}) {
          SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                       " bias=" + std::to_string(bias) + " mask=" + std::to_string(mask) +
                       " eps=" + std::to_string(eps));
          Head h(m, n, k, seed++);
          const HeadOut a = fused(h, bias, mask, eps), b = separate(h, bias, mask, eps);
          EXPECT_TRUE(same_bits(a.logits, b.logits));
          EXPECT_TRUE(same_bits(a.dlogits, b.dlogits));
          EXPECT_TRUE(same_bits(a.dx, b.dx));
          EXPECT_EQ(std::memcmp(&a.results, &b.results, sizeof a.results), 0);
          EXPECT_EQ(a.results.samples, static_cast<float>(m));
          if (mask) {
            for (size_t i = 0; i < a.dx.size(); ++i) {
              if (h.x[i] <= 0.0f) {
                ASSERT_EQ(a.dx[i], 0.0f) << "element " << i << " not masked";
              }
            }
          }
        }
}

TEST(CpuFcSoftmaxXent, BadInputIsAnError) {
  Head h(8, 10, 16, 99);
  std::vector<float> logits(80), dlogits(80), dx(128);
  FrBatchResults r{};
  auto call = [&](int64_t n_w, bool with_bias) {
    OpCall c(FR_OP_FC_SOFTMAX_XENT);
    c.in(tensor(h.x, {8, 1, 1, 16})).in(tensor(h.w, {n_w, 1, 1, 16})).in(tensor(h.labels, {8, 1, 1, 1}));
    c.out(tensor(logits, {8, 1, 1, n_w})).out(tensor(dlogits, {8, 1, 1, n_w})).out(tensor(dx, {8, 1, 1, 16}));
    c.rout(fresco::test::pod_range(r)).params(FrFcSoftmaxXentParams{with_bias ? 1 : 0, 0, 0.0f, 0});
    return c.run_error();
  };
  EXPECT_EQ(call(10, false), "");
  EXPECT_NE(call(10, true).find("has_bias"), std::string::npos);  // no bias tensor given
  h.labels[3] = 10;
  EXPECT_NE(call(10, false).find("label of row 3"), std::string::npos);
  h.labels[3] = 0;
  std::vector<float> big(33 * 16);
  h.w = big;
  logits.resize(8 * 33);
  dlogits.resize(8 * 33);
  EXPECT_NE(call(33, false).find("classes"), std::string::npos);
}

}  // namespace
