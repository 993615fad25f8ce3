// Conformance of the CPU sgd_update, adam_update and ema_update range ops against PyTorch's algorithms
// (reference/optimizers.h) over several steps: SGD plain / weight decay / momentum / Nesterov, Adam with L2
// decay, AdamW with decoupled decay. lr and step come from the FrStepScalars range (lr changes every step;
// step is advanced by step_done, and a resumed run starts at a late step); skip_step != 0 leaves weights and
// buffers bitwise unchanged; size mismatches, a missing momentum buffer and bad params return errors; the
// momentum (Adam: beta1) of a per-step table where the node has one. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/optimizers.h"

namespace {

using fresco::test::OpCall;
using fresco::test::pod_range;
using fresco::test::range;

constexpr float kLrs[] = {0.1f, 0.05f, 0.2f, 0.01f, 0.1f, 0.03f};
const size_t kSizes[] = {1, 37, 3 * 16384 + 5};

// Optimizer results must equal the double reference to float round-off accumulated over a few steps. The
// absolute part scales with the terms summed: |w| <= ~1 for weights; a momentum buffer sums up to ~6
// unit-sized gradients, so cancellation leaves an absolute error of a few float ulps of 6.
constexpr double kRtol = 2e-6, kAtol = 2e-7, kAtolBuffer = 1e-6;

void advance_step(FrStepScalars& s) {
  OpCall c(FR_OP_STEP_DONE, FR_U8);
  c.rout(pod_range(s));
  ASSERT_TRUE(c.run());
}

struct SgdCase {
  float momentum, weight_decay;
  int32_t nesterov;
};
std::string str(const SgdCase& k) {
  return "momentum=" + std::to_string(k.momentum) + " wd=" + std::to_string(k.weight_decay) +
         " nesterov=" + std::to_string(k.nesterov);
}

::testing::AssertionResult run_sgd(std::vector<float>& w, std::vector<float>& buf, std::vector<float>& g,
                                   FrStepScalars& s, const SgdCase& k) {
  OpCall c(FR_OP_SGD_UPDATE);
  c.rout(range(w));
  if (k.momentum != 0.0f) c.rout(range(buf));
  c.rin(range(g)).rin(pod_range(s)).params(FrSgdParams{k.momentum, k.weight_decay, k.nesterov, 0});
  return c.run();
}

TEST(CpuSgd, MatchesPyTorchOverSeveralSteps) {
  const SgdCase cases[] = {{0.0f, 0.0f, 0},  {0.0f, 5e-4f, 0}, {0.9f, 0.0f, 0},
                           {0.9f, 1e-2f, 0}, {0.9f, 0.0f, 1},  {0.8f, 5e-3f, 1}};
  uint32_t seed = 71;
  for (const SgdCase& k : cases)
    for (size_t n : kSizes) {
      SCOPED_TRACE(str(k) + " n=" + std::to_string(n));
      std::mt19937 rng(seed++);
      std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), buf(n, 0.0f);
      fresco::ref::SgdState ref{fresco::test::to_double(w), {}, false};
      const fresco::ref::SgdConfig cfg{k.momentum, k.weight_decay, k.nesterov != 0};
      FrStepScalars s{};
      for (float lr : kLrs) {
        std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
        s.lr = lr;
        ASSERT_TRUE(run_sgd(w, buf, g, s, k));
        advance_step(s);
        fresco::ref::sgd_step(ref, fresco::test::to_double(g), lr, cfg);
      }
      EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol)) << "weights";
      if (k.momentum != 0.0f) {
        EXPECT_TRUE(fresco::test::all_close(buf, ref.buf, kRtol, kAtolBuffer)) << "momentum buffer";
      }
    }
}

// A per-step momentum table (ops.h, FR_KERNEL_STEP_MOMENTUM; one-cycle's cycled momentum): each step takes
// the table's entry at its step, the last one past the end, as PyTorch's SGD reads the group's momentum
// every step; params.momentum only says a buffer exists.
TEST(CpuSgd, MomentumComesFromThePerStepTable) {
  std::vector<float> table = {0.95f, 0.9f, 0.85f, 0.875f};
  for (int32_t nesterov : {0, 1}) {
    SCOPED_TRACE("nesterov=" + std::to_string(nesterov));
    const size_t n = 37;
    std::mt19937 rng(73);
    std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), buf(n, 0.0f);
    fresco::ref::SgdState ref{fresco::test::to_double(w), {}, false};
    FrStepScalars s{};
    for (size_t i = 0; i < 6; ++i) {
      std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
      s.lr = kLrs[i];
      OpCall c(FR_OP_SGD_UPDATE);
      c.rout(range(w)).rout(range(buf)).rin(range(g)).rin(pod_range(s)).rin(range(table));
      c.params(FrSgdParams{0.5f, 1e-3f, nesterov, 0});
      ASSERT_TRUE(c.run());
      advance_step(s);
      fresco::ref::sgd_step(ref, fresco::test::to_double(g), kLrs[i],
                            fresco::ref::SgdConfig{table[std::min<size_t>(i, 3)], 1e-3, nesterov != 0});
    }
    EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol)) << "weights";
    EXPECT_TRUE(fresco::test::all_close(buf, ref.buf, kRtol, kAtolBuffer)) << "momentum buffer";
  }
  std::vector<float> w(4), buf(4), g(4), none;
  FrStepScalars s{};
  OpCall c(FR_OP_SGD_UPDATE);
  c.rout(range(w)).rout(range(buf)).rin(range(g)).rin(pod_range(s)).rin(range(none));
  c.params(FrSgdParams{0.9f, 0.0f, 0, 0});
  EXPECT_TRUE(fresco::test::contains(c.run_error(), "momentum table holds no value")) << c.run_error();
}

TEST(CpuSgd, SkipStepLeavesEverythingUnchanged) {
  const SgdCase k{0.9f, 1e-3f, 1};
  const size_t n = 1001;
  std::mt19937 rng(72);
  std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), buf(n, 0.0f);
  fresco::ref::SgdState ref{fresco::test::to_double(w), {}, false};
  const fresco::ref::SgdConfig cfg{k.momentum, k.weight_decay, true};
  FrStepScalars s{};
  for (int i = 0; i < 5; ++i) {
    std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
    s.lr = kLrs[i];
    s.skip_step = i == 2 ? 1 : 0;
    const std::vector<float> w_before = w, buf_before = buf;
    ASSERT_TRUE(run_sgd(w, buf, g, s, k));
    if (s.skip_step) {
      EXPECT_TRUE(fresco::test::bitwise_equal(w, w_before));
      EXPECT_TRUE(fresco::test::bitwise_equal(buf, buf_before));
      continue;
    }
    fresco::ref::sgd_step(ref, fresco::test::to_double(g), kLrs[i], cfg);
  }
  EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol));
  EXPECT_TRUE(fresco::test::all_close(buf, ref.buf, kRtol, kAtolBuffer));
}

TEST(CpuSgd, LrIsReadFromTheScalarsEveryStep) {
  // Plain SGD with g = 1: each step moves w by exactly -lr of that step.
  std::vector<float> w(8, 1.0f), buf, g(8, 1.0f);
  FrStepScalars s{};
  float expected = 1.0f;
  for (float lr : {0.25f, 0.125f, 0.5f}) {
    s.lr = lr;
    ASSERT_TRUE(run_sgd(w, buf, g, s, SgdCase{0.0f, 0.0f, 0}));
    expected -= lr;
    for (float v : w) ASSERT_EQ(v, expected) << "lr " << lr;
  }
}

TEST(CpuSgd, BadInputsReturnErrors) {
  std::vector<float> w(16), g(16), g_short(15), buf(16), buf_short(8);
  FrStepScalars s{};
  s.lr = 0.1f;
  {
    OpCall c(FR_OP_SGD_UPDATE);
    c.rout(range(w))
        .rout(range(buf))
        .rin(range(g_short))
        .rin(pod_range(s))
        .params(FrSgdParams{0.9f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "do not hold one 4-byte value per weight"))
        << c.run_error();
  }
  {
    OpCall c(FR_OP_SGD_UPDATE);  // momentum without a buffer
    c.rout(range(w)).rin(range(g)).rin(pod_range(s)).params(FrSgdParams{0.9f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "momentum buffer")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SGD_UPDATE);  // buffer of another size
    c.rout(range(w))
        .rout(range(buf_short))
        .rin(range(g))
        .rin(pod_range(s))
        .params(FrSgdParams{0.9f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "momentum buffer")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SGD_UPDATE);  // no step scalars
    c.rout(range(w)).rin(range(g)).params(FrSgdParams{0.0f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_SGD_UPDATE);  // Adam's params
    c.rout(range(w)).rin(range(g)).rin(pod_range(s)).params(FrAdamParams{0.9f, 0.999f, 1e-8f, 0.0f, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
}

// The weight copy (ops.h, FR_KERNEL_WEIGHT_COPY): sgd_update (with and without momentum) and adam_update
// given a last f16 / bf16 range write the bits cast_range gives for the weights after the step, a skipped
// step included, and leave the update itself as it is without the copy; a copy of another size is refused,
// and an f32 range past the fixed ones is no copy (a buffer given to an update without momentum, as the
// compiler gives LARS's 1-d parameters).
TEST(CpuOptimizers, WeightCopyIsTheCastOfTheWeightsAfterTheStep) {
  const size_t n = 3 * 16384 + 5;  // several chunks
  for (uint32_t dt : {uint32_t{FR_F16}, uint32_t{FR_BF16}})
    for (int which = 0; which < 3; ++which) {  // sgd nesterov, plain sgd, adamw
      const std::string name = std::string(which == 2   ? "adamw"
                                           : which == 1 ? "sgd"
                                                        : "sgd nesterov") +
                               (dt == FR_F16 ? " f16" : " bf16");
      std::mt19937 rng(11);
      std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), m(n, 0.0f), v(n, 0.0f);
      std::vector<float> w2 = w, m2 = m, v2 = v;  // the run without the copy
      std::vector<uint16_t> copy(n, 0), cast(n, 0);
      FrStepScalars s{};
      for (int step = 0; step < 3; ++step) {
        std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
        s.lr = kLrs[step];
        s.skip_step = step == 1 ? 1 : 0;
        std::fill(copy.begin(), copy.end(), uint16_t{0x7e00});  // NaN in f16: each step must write it
        for (bool with_copy : {true, false}) {
          OpCall c(which == 2 ? FR_OP_ADAM_UPDATE : FR_OP_SGD_UPDATE);
          c.rout(range(with_copy ? w : w2));
          if (which != 1) c.rout(range(with_copy ? m : m2));
          if (which == 2) c.rout(range(with_copy ? v : v2));
          if (with_copy) c.rout(range(copy.data(), 2 * n, dt));
          c.rin(range(g)).rin(pod_range(s));
          if (which == 2)
            c.params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, 0});
          else
            c.params(FrSgdParams{which == 0 ? 0.9f : 0.0f, 5e-4f, which == 0 ? 1 : 0, 0});
          ASSERT_TRUE(c.run()) << name;
        }
        OpCall c(FR_OP_CAST_RANGE);
        c.rin(range(w)).rout(range(cast.data(), 2 * n, dt));
        ASSERT_TRUE(c.run());
        EXPECT_TRUE(copy == cast) << name << ": the copy is not the cast after step " << step;
        EXPECT_TRUE(fresco::test::bitwise_equal(w, w2)) << name << " step " << step;
        EXPECT_TRUE(fresco::test::bitwise_equal(m, m2)) << name << " step " << step;
        EXPECT_TRUE(fresco::test::bitwise_equal(v, v2)) << name << " step " << step;
      }
    }
  std::vector<float> w(16, 1.0f), g(16, 1.0f), buf(16, 5.0f);
  std::vector<uint16_t> short_copy(15);
  FrStepScalars s{};
  s.lr = 0.5f;
  {
    OpCall c(FR_OP_SGD_UPDATE);  // no momentum, a buffer given: updated, the buffer untouched
    c.rout(range(w)).rout(range(buf)).rin(range(g)).rin(pod_range(s)).params(FrSgdParams{0.0f, 0, 0, 0});
    ASSERT_TRUE(c.run());
    for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], 0.5f) << i;
    for (float b : buf) EXPECT_EQ(b, 5.0f);
  }
  {
    OpCall c(FR_OP_SGD_UPDATE);
    c.rout(range(w))
        .rout(range(buf))
        .rout(range(short_copy.data(), 30, FR_F16))
        .rin(range(g))
        .rin(pod_range(s));
    c.params(FrSgdParams{0.9f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "one 16-bit value per weight")) << c.run_error();
  }
  {
    OpCall c(FR_OP_ADAM_UPDATE);
    std::vector<float> m(16), v(16);
    c.rout(range(w)).rout(range(m)).rout(range(v)).rout(range(short_copy.data(), 30, FR_BF16));
    c.rin(range(g)).rin(pod_range(s)).params(FrAdamParams{0.9f, 0.999f, 1e-8f, 0.0f, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "one 16-bit value per weight")) << c.run_error();
  }
}

// LARS (ops.h, lars_update) against the double reference over several steps, on one tensor of each size
// (the norms add over chunks of 2^14 on several threads), with a momentum table, with all-zero weights (a
// ratio of 1), and skip_step leaving everything unchanged.
TEST(CpuLars, MatchesTheReferenceOverSeveralSteps) {
  uint32_t seed = 75;
  std::vector<float> table = {0.95f, 0.9f, 0.85f};
  for (bool cycled : {false, true})
    for (size_t n : kSizes) {
      SCOPED_TRACE("n=" + std::to_string(n) + (cycled ? " with a momentum table" : ""));
      std::mt19937 rng(seed++);
      std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), buf(n, 0.0f);
      fresco::ref::SgdState ref{fresco::test::to_double(w), {}, false};
      FrStepScalars s{};
      for (size_t i = 0; i < 5; ++i) {
        std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
        s.lr = kLrs[i];
        OpCall c(FR_OP_LARS_UPDATE);
        c.rout(range(w)).rout(range(buf)).rin(range(g)).rin(pod_range(s));
        if (cycled) c.rin(range(table));
        c.params(FrLarsParams{0.9f, 5e-3f, 0.02f, 0});
        ASSERT_TRUE(c.run());
        advance_step(s);
        const double mom = cycled ? table[std::min<size_t>(i, 2)] : 0.9;
        fresco::ref::lars_step(ref, fresco::test::to_double(g), kLrs[i],
                               fresco::ref::LarsConfig{mom, 5e-3, 0.02});
      }
      EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol)) << "weights";
      EXPECT_TRUE(fresco::test::all_close(buf, ref.buf, kRtol, kAtolBuffer)) << "momentum buffer";
    }
  // one step on a tensor of its own
  auto step = [](std::vector<float>& w, std::vector<float>& b, std::vector<float>& g, FrStepScalars& s,
                 FrLarsParams p) {
    OpCall c(FR_OP_LARS_UPDATE);
    c.rout(range(w)).rout(range(b)).rin(range(g)).rin(pod_range(s)).params(p);
    return c.run_error();
  };
  std::vector<float> zero(8, 0.0f), buf(8, 0.0f), g(8, 1.0f);  // ||w|| = 0: the plain step (q = 1)
  FrStepScalars s{};
  s.lr = 0.5f;
  EXPECT_EQ(step(zero, buf, g, s, FrLarsParams{0.9f, 0.0f, 1e-3f, 0}), "");
  EXPECT_EQ(zero, std::vector<float>(8, -0.5f));
  std::vector<float> w = {1.0f, -2.0f}, b2(2, 0.0f), g2 = {-0.5f, 1.0f};  // g = -wd w: ||d|| = 0, q = 1
  EXPECT_EQ(step(w, b2, g2, s, FrLarsParams{0.9f, 0.5f, 1e-3f, 0}), "");
  EXPECT_EQ(w, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(b2, (std::vector<float>{0.0f, 0.0f}));
  s.skip_step = 1;  // a skipped step changes nothing
  const std::vector<float> w0 = zero, b0 = buf;
  EXPECT_EQ(step(zero, buf, g, s, FrLarsParams{0.9f, 0.0f, 1e-3f, 0}), "");
  EXPECT_TRUE(fresco::test::bitwise_equal(zero, w0) && fresco::test::bitwise_equal(buf, b0));
  const std::string bad = step(zero, buf, g, s, FrLarsParams{0.9f, 0.0f, 0.0f, 0});
  EXPECT_TRUE(fresco::test::contains(bad, "eta must be positive")) << bad;
}

struct AdamCase {
  float beta1, beta2, eps, weight_decay;
  int32_t decoupled;
};
std::string str(const AdamCase& k) {
  return std::string(k.decoupled ? "AdamW" : "Adam") + " beta1=" + std::to_string(k.beta1) +
         " beta2=" + std::to_string(k.beta2) + " eps=" + std::to_string(k.eps) +
         " wd=" + std::to_string(k.weight_decay);
}

::testing::AssertionResult run_adam(std::vector<float>& w, std::vector<float>& m, std::vector<float>& v,
                                    std::vector<float>& g, FrStepScalars& s, const AdamCase& k) {
  OpCall c(FR_OP_ADAM_UPDATE);
  c.rout(range(w)).rout(range(m)).rout(range(v)).rin(range(g)).rin(pod_range(s));
  c.params(FrAdamParams{k.beta1, k.beta2, k.eps, k.weight_decay, k.decoupled, 0});
  return c.run();
}

const AdamCase kAdamCases[] = {{0.9f, 0.999f, 1e-8f, 0.0f, 0},
                               {0.9f, 0.999f, 1e-8f, 1e-2f, 0},
                               {0.9f, 0.999f, 1e-8f, 1e-2f, 1},
                               {0.8f, 0.99f, 1e-6f, 0.1f, 1},
                               {0.9f, 0.999f, 1e-8f, 0.0f, 1}};

TEST(CpuAdam, MatchesPyTorchOverSeveralSteps) {
  uint32_t seed = 81;
  for (const AdamCase& k : kAdamCases)
    for (size_t n : kSizes) {
      SCOPED_TRACE(str(k) + " n=" + std::to_string(n));
      std::mt19937 rng(seed++);
      std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), m(n, 0.0f), v(n, 0.0f);
      fresco::ref::AdamState ref{fresco::test::to_double(w), std::vector<double>(n, 0.0),
                                 std::vector<double>(n, 0.0), 0};
      const fresco::ref::AdamConfig cfg{k.beta1, k.beta2, k.eps, k.weight_decay, k.decoupled != 0};
      FrStepScalars s{};
      for (float lr : kLrs) {
        std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
        s.lr = lr * 0.01f;
        ASSERT_TRUE(run_adam(w, m, v, g, s, k));
        advance_step(s);
        fresco::ref::adam_step(ref, fresco::test::to_double(g), lr * 0.01f, cfg);
      }
      EXPECT_EQ(s.step, 6);
      EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol)) << "weights";
      EXPECT_TRUE(fresco::test::all_close(m, ref.m, kRtol, kAtol)) << "first moment";
      EXPECT_TRUE(fresco::test::all_close(v, ref.v, kRtol, kAtol * 1e-2)) << "second moment";
    }
}

TEST(CpuAdam, BiasCorrectionUsesTheStepCounter) {
  // A resumed run: 1000 updates already applied, non-zero moments. The kernel must use t = updates + 1.
  for (const AdamCase& k : kAdamCases) {
    SCOPED_TRACE(str(k));
    const size_t n = 513;
    std::mt19937 rng(91);
    std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
    std::vector<float> m = fresco::test::random_floats(rng, n, -0.1f, 0.1f);
    std::vector<float> v = fresco::test::random_floats(rng, n, 1e-4f, 1e-2f);
    fresco::ref::AdamState ref{fresco::test::to_double(w), fresco::test::to_double(m),
                               fresco::test::to_double(v), 1000};
    const fresco::ref::AdamConfig cfg{k.beta1, k.beta2, k.eps, k.weight_decay, k.decoupled != 0};
    FrStepScalars s{};
    s.step = 1000;
    s.updates = 1000;
    for (int i = 0; i < 3; ++i) {
      std::vector<float> g = fresco::test::random_floats(rng, n, -0.1f, 0.1f);
      s.lr = 1e-3f * static_cast<float>(i + 1);
      ASSERT_TRUE(run_adam(w, m, v, g, s, k));
      advance_step(s);
      fresco::ref::adam_step(ref, fresco::test::to_double(g), 1e-3 * (i + 1), cfg);
    }
    EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol));
    EXPECT_TRUE(fresco::test::all_close(m, ref.m, kRtol, kAtol));
    EXPECT_TRUE(fresco::test::all_close(v, ref.v, kRtol, kAtol * 1e-2));
  }
}

// Adam's beta1 from a per-step table (one-cycle cycles it): the step's beta1 moves the first moment and
// corrects its bias, as PyTorch's Adam reads betas[0] every step.
TEST(CpuAdam, Beta1ComesFromThePerStepTable) {
  std::vector<float> table = {0.95f, 0.9f, 0.85f};
  for (const AdamCase& k : kAdamCases) {
    SCOPED_TRACE(str(k));
    const size_t n = 129;
    std::mt19937 rng(93);
    std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), m(n, 0.0f), v(n, 0.0f);
    fresco::ref::AdamState ref{fresco::test::to_double(w), std::vector<double>(n, 0.0),
                               std::vector<double>(n, 0.0), 0};
    FrStepScalars s{};
    for (size_t i = 0; i < 5; ++i) {
      std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
      s.lr = kLrs[i] * 0.01f;
      OpCall c(FR_OP_ADAM_UPDATE);
      c.rout(range(w)).rout(range(m)).rout(range(v)).rin(range(g)).rin(pod_range(s)).rin(range(table));
      c.params(FrAdamParams{k.beta1, k.beta2, k.eps, k.weight_decay, k.decoupled, 0});
      ASSERT_TRUE(c.run());
      advance_step(s);
      const fresco::ref::AdamConfig cfg{table[std::min<size_t>(i, 2)], k.beta2, k.eps, k.weight_decay,
                                        k.decoupled != 0};
      fresco::ref::adam_step(ref, fresco::test::to_double(g), kLrs[i] * 0.01f, cfg);
    }
    EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol)) << "weights";
    EXPECT_TRUE(fresco::test::all_close(m, ref.m, kRtol, kAtol)) << "first moment";
  }
}

TEST(CpuAdam, FirstStepMovesEachWeightByLr) {
  // t = 1, no decay: m_hat = g and v_hat = g^2, so w moves by lr * g / (|g| + eps) ~ lr * sign(g).
  std::vector<float> w(6, 0.5f), m(6, 0.0f), v(6, 0.0f), g = {1.0f, -2.0f, 0.5f, -0.25f, 3.0f, -1e-3f};
  FrStepScalars s{};
  s.lr = 0.01f;
  ASSERT_TRUE(run_adam(w, m, v, g, s, AdamCase{0.9f, 0.999f, 1e-8f, 0.0f, 0}));
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_NEAR(w[i], 0.5 - 0.01 * (g[i] > 0 ? 1.0 : -1.0), 1e-6) << "element " << i;
}

TEST(CpuAdam, SkipStepLeavesEverythingUnchanged) {
  const AdamCase k{0.9f, 0.999f, 1e-8f, 1e-2f, 1};
  const size_t n = 777;
  std::mt19937 rng(92);
  std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), m(n, 0.0f), v(n, 0.0f);
  fresco::ref::AdamState ref{fresco::test::to_double(w), std::vector<double>(n, 0.0),
                             std::vector<double>(n, 0.0), 0};
  const fresco::ref::AdamConfig cfg{k.beta1, k.beta2, k.eps, k.weight_decay, true};
  FrStepScalars s{};
  for (int i = 0; i < 5; ++i) {
    std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
    s.lr = kLrs[i] * 0.01f;
    s.skip_step = (i == 0 || i == 3) ? 1 : 0;
    const std::vector<float> w0 = w, m0 = m, v0 = v;
    ASSERT_TRUE(run_adam(w, m, v, g, s, k));
    const bool skipped = s.skip_step != 0;
    advance_step(s);  // step_done ends every step, skipped or not
    if (skipped) {
      EXPECT_TRUE(fresco::test::bitwise_equal(w, w0) && fresco::test::bitwise_equal(m, m0) &&
                  fresco::test::bitwise_equal(v, v0))
          << "step " << i;
      continue;  // a skipped update is not counted by Adam's bias correction (GradScaler semantics)
    }
    fresco::ref::adam_step(ref, fresco::test::to_double(g), kLrs[i] * 0.01, cfg);
  }
  EXPECT_EQ(s.step, 5);     // the lr schedule follows every step
  EXPECT_EQ(s.updates, 3);  // Adam counts the applied updates
  EXPECT_EQ(s.skip_step, 0);
  EXPECT_TRUE(fresco::test::all_close(w, ref.w, kRtol, kAtol));
  EXPECT_TRUE(fresco::test::all_close(m, ref.m, kRtol, kAtol));
}

TEST(CpuAdam, BadInputsReturnErrors) {
  std::vector<float> w(16), m(16), v(16), v_short(15), g(16);
  FrStepScalars s{};
  const FrAdamParams p{0.9f, 0.999f, 1e-8f, 0.0f, 0, 0};
  {
    OpCall c(FR_OP_ADAM_UPDATE);
    c.rout(range(w)).rout(range(m)).rout(range(v_short)).rin(range(g)).rin(pod_range(s)).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "differ in size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_ADAM_UPDATE);  // v missing
    c.rout(range(w)).rout(range(m)).rin(range(g)).rin(pod_range(s)).params(p);
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
  {
    OpCall c(FR_OP_ADAM_UPDATE);  // SGD's params
    c.rout(range(w)).rout(range(m)).rout(range(v)).rin(range(g)).rin(pod_range(s));
    c.params(FrSgdParams{0.9f, 0.0f, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
}

TEST(CpuOptimizers, NoKernelForLowPrecisionMasterWeights) {
  // Master weights are FP32 (DESIGN §3); the CPU table offers sgd/adam for f32 only.
  EXPECT_NE(fresco::test::find_kernel(FR_OP_SGD_UPDATE, FR_F32), nullptr);
  EXPECT_EQ(fresco::test::find_kernel(FR_OP_SGD_UPDATE, FR_F16), nullptr);
  EXPECT_EQ(fresco::test::find_kernel(FR_OP_ADAM_UPDATE, FR_BF16), nullptr);
}

}  // namespace

// ema_update (ops.h): with every 3, steps 0 and 1 leave E, step 2 copies W (AveragedModel's first update),
// step 5 averages as torch.lerp(E, W, 1 - decay) in float, steps 3 and 4 leave E again; bad params and sizes
// are errors.
TEST(CpuEma, CopiesThenAveragesEveryKthStep) {
  const auto kWeight = static_cast<float>(1.0 - 0.9);  // decay 0.9, as PyTorch passes lerp its weight
  std::mt19937 rng(5);
  std::vector<float> w = fresco::test::random_floats(rng, 1031, -1.0f, 1.0f);
  const std::vector<float> e0 = fresco::test::random_floats(rng, 1031, -1.0f, 1.0f);
  FrStepScalars s{};  // outlives each call: the OpCall keeps a pointer to it until it runs
  auto run = [&](std::vector<float>& e, int32_t step, FrEmaParams p) {
    s.step = step;
    OpCall c(FR_OP_EMA_UPDATE);
    c.rout(range(e)).rin(range(w)).rin(pod_range(s)).params(p);
    return c;
  };
  std::vector<float> e = e0;
  for (int32_t step : {0, 1}) ASSERT_TRUE(run(e, step, {kWeight, 3}).run());
  EXPECT_EQ(e, e0);
  ASSERT_TRUE(run(e, 2, {kWeight, 3}).run());
  EXPECT_EQ(e, w);
  const std::vector<float> copied = e;
  w = fresco::test::random_floats(rng, 1031, -1.0f, 1.0f);
  for (int32_t step : {3, 4}) ASSERT_TRUE(run(e, step, {kWeight, 3}).run());
  EXPECT_EQ(e, copied);
  ASSERT_TRUE(run(e, 5, {kWeight, 3}).run());
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_EQ(e[i], copied[i] + kWeight * (w[i] - copied[i])) << i;
  }
  EXPECT_FALSE(run(e, 5, {0.0f, 3}).run());     // the weight (1 - decay) must be above 0
  EXPECT_FALSE(run(e, 5, {kWeight, 0}).run());  // every at least 1
  EXPECT_FALSE(run(e, 5, {std::numeric_limits<float>::quiet_NaN(), 3}).run());
  EXPECT_FALSE(run(e, 5, {1.5f, 3}).run());  // above 1: not an average
  std::vector<float> short_e(7);
  OpCall bad(FR_OP_EMA_UPDATE);
  bad.rout(range(short_e)).rin(range(w)).rin(pod_range(s)).params(FrEmaParams{kWeight, 1});
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "E and W sizes differ")) << bad.run_error();
}

// The backups (ops.h, FR_KERNEL_UPDATE_BACKUPS): sgd_update and adam_update with params.backups write each
// f32 range as it was before the step into its backup (after the weight copy, any dtype: a byte copy), on a
// skipped step too, and update exactly as without; backups of another size, or a bad flag, are refused.
TEST(CpuOptimizers, BackupsHoldTheRangesFromBeforeTheStep) {
  const size_t n = 3 * 16384 + 5;
  std::mt19937 rng(91);
  for (bool adam : {false, true})
    for (int skip : {0, 1}) {
      SCOPED_TRACE(std::string(adam ? "adam" : "sgd") + (skip ? ", skipped step" : ""));
      std::vector<float> g = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
      const std::vector<float> w0 = fresco::test::random_floats(rng, n, -1.0f, 1.0f),
                               m0 = fresco::test::random_floats(rng, n, -0.1f, 0.1f),
                               v0 = fresco::test::random_floats(rng, n, 0.01f, 0.1f);
      FrStepScalars s{};
      s.lr = 0.1f, s.skip_step = skip;
      auto run = [&](bool backups, std::vector<std::vector<float>>& state, std::vector<uint16_t>& copy,
                     std::vector<std::vector<uint16_t>>& kept) {
        state = adam ? std::vector{w0, m0, v0} : std::vector{w0, m0};
        copy.assign(n, 0);
        kept.assign(state.size(), std::vector<uint16_t>(2 * n, 0xFFFF));  // f32 bytes as 16-bit pairs
        OpCall c(adam ? FR_OP_ADAM_UPDATE : FR_OP_SGD_UPDATE);
        for (auto& r : state) c.rout(range(r));
        c.rout(range(copy.data(), 2 * n, FR_F16));
        if (backups)
          for (auto& k : kept) c.rout(range(k.data(), 4 * n, FR_F16));
        c.rin(range(g)).rin(pod_range(s));
        if (adam)
          c.params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, backups ? 1 : 0});
        else
          c.params(FrSgdParams{0.9f, 5e-4f, 1, backups ? 1 : 0});
        ASSERT_TRUE(c.run()) << c.run_error();
      };
      std::vector<std::vector<float>> with, without;
      std::vector<uint16_t> copy_with, copy_without;
      std::vector<std::vector<uint16_t>> kept, unused;
      run(true, with, copy_with, kept);
      run(false, without, copy_without, unused);
      for (size_t k = 0; k < with.size(); ++k) {
        EXPECT_TRUE(fresco::test::bitwise_equal(with[k], without[k])) << "range " << k;
        const std::vector<float>& before = k == 0 ? w0 : k == 1 ? m0 : v0;
        EXPECT_EQ(std::memcmp(kept[k].data(), before.data(), n * sizeof(float)), 0) << "backup " << k;
      }
      EXPECT_EQ(copy_with, copy_without);
      EXPECT_EQ(skip != 0, fresco::test::bitwise_equal(with[0], w0));
    }
  std::vector<float> w(16), buf(16), g(16);
  std::vector<uint16_t> short_backup(30), right(32);
  FrStepScalars s{};
  OpCall small(FR_OP_SGD_UPDATE);
  small.rout(range(w)).rout(range(buf)).rout(range(right.data(), 64, FR_F16));  // w's backup, then buf's
  small.rout(range(short_backup.data(), 60, FR_F16)).rin(range(g)).rin(pod_range(s));
  small.params(FrSgdParams{0.9f, 0, 0, 1});
  EXPECT_TRUE(fresco::test::contains(small.run_error(), "backup 1")) << small.run_error();
  OpCall flag(FR_OP_SGD_UPDATE);
  flag.rout(range(w)).rout(range(buf)).rin(range(g)).rin(pod_range(s)).params(FrSgdParams{0.9f, 0, 0, 2});
  EXPECT_TRUE(fresco::test::contains(flag.run_error(), "backups must be 0 or 1")) << flag.run_error();
  OpCall extra(FR_OP_SGD_UPDATE);  // one range too many: which are the backups is ambiguous
  extra.rout(range(w)).rout(range(buf)).rout(range(w)).rout(range(buf)).rout(range(right.data(), 64, FR_F16));
  extra.rout(range(right.data(), 64, FR_F16))
      .rin(range(g))
      .rin(pod_range(s))
      .params(FrSgdParams{0.9f, 0, 0, 1});
  EXPECT_TRUE(fresco::test::contains(extra.run_error(), "take as many backups")) << extra.run_error();
}
