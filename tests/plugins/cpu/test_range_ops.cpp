// Conformance of the CPU range ops: clear (several ranges, sizes past the parallel grain, neighbours
// untouched), copy (byte-exact, size mismatch is an error), accumulate_metrics (sums of loss * samples, hits,
// samples, batches), lr_schedule (constant, warm-up, cosine past the end, table with clamping, against
// reference/lr_schedule.h) and step_done (step + 1, nothing else). Ranges are byte spans of host buffers,
// as the runtime hands out region spans. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/lr_schedule.h"

namespace {

using fresco::test::OpCall;
using fresco::test::pod_range;
using fresco::test::range;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() | 1u);  // never zero, so a cleared byte is visible
  return v;
}

TEST(CpuClear, ZeroesEveryRangeAndNothingElse) {
  const size_t sizes[] = {1, 3, 256, (1u << 20) + 5, 3u * (1u << 20) + 17};
  for (size_t n : sizes) {
    SCOPED_TRACE("bytes=" + std::to_string(n));
    // Two ranges inside one buffer with 64-byte guards around and between them.
    std::vector<uint8_t> buf = random_bytes(n + 64 + 7 + 64 + 64, static_cast<uint32_t>(n));
    const std::vector<uint8_t> before = buf;
    uint8_t* a = buf.data() + 64;
    uint8_t* b = a + n + 64;
    OpCall c(FR_OP_CLEAR, FR_U8);
    c.rout(range(a, n, FR_U8)).rout(range(b, 7, FR_U8));
    ASSERT_TRUE(c.run());
    for (size_t i = 0; i < buf.size(); ++i) {
      const uint8_t* p = buf.data() + i;
      const bool inside = (p >= a && p < a + n) || (p >= b && p < b + 7);
      ASSERT_EQ(buf[i], inside ? 0 : before[i]) << "byte " << i;
    }
  }
}

TEST(CpuClear, AcceptsEveryDtypeAndNeedsARange) {
  for (uint32_t dt : {FR_F32, FR_F16, FR_BF16, FR_I32, FR_I8, FR_U8}) {
    std::vector<float> v(10, 1.0f);
    OpCall c(FR_OP_CLEAR, dt);
    c.rout(range(v.data(), v.size() * sizeof(float), dt));
    ASSERT_TRUE(c.run()) << "dtype " << dt;
    for (float x : v) ASSERT_EQ(x, 0.0f);
  }
  OpCall none(FR_OP_CLEAR, FR_U8);
  EXPECT_TRUE(fresco::test::contains(none.run_error(), "expected at least")) << none.run_error();
}

TEST(CpuCopy, CopiesBytesExactly) {
  for (size_t n : {size_t{1}, size_t{4096}, size_t{(1u << 20) + 3}}) {
    SCOPED_TRACE("bytes=" + std::to_string(n));
    std::vector<uint8_t> src = random_bytes(n, 7);
    std::vector<uint8_t> dst(n + 32, 0);
    OpCall c(FR_OP_COPY, FR_U8);
    c.rin(range(src.data(), n, FR_U8)).rout(range(dst.data() + 16, n, FR_U8));
    ASSERT_TRUE(c.run());
    EXPECT_EQ(std::memcmp(dst.data() + 16, src.data(), n), 0);
    for (size_t i = 0; i < 16; ++i) ASSERT_EQ(dst[i], 0) << "guard before";
    for (size_t i = n + 16; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0) << "guard after";
  }
}

TEST(CpuCopy, SizeMismatchAndMissingRangesAreErrors) {
  std::vector<uint8_t> src(100, 1), dst(99, 0);
  {
    OpCall c(FR_OP_COPY, FR_U8);
    c.rin(range(src)).rout(range(dst));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "source has 100 bytes")) << c.run_error();
    for (uint8_t b : dst) ASSERT_EQ(b, 0) << "nothing copied on error";
  }
  {
    OpCall c(FR_OP_COPY, FR_U8);
    c.rout(range(dst));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
}

TEST(CpuAccumulateMetrics, SumsBatches) {
  FrMetricAccumulators acc{};
  const FrBatchResults batches[] = {
      {2.5f, 60.0f, 128.0f, 0.0f}, {1.25f, 100.0f, 128.0f, 0.0f}, {0.5f, 7.0f, 37.0f, 0.0f}};
  double loss_sum = 0.0, correct = 0.0, samples = 0.0;
  for (FrBatchResults b : batches) {
    OpCall c(FR_OP_ACCUMULATE_METRICS, FR_U8);
    c.rin(pod_range(b)).rout(pod_range(acc));
    ASSERT_TRUE(c.run());
    loss_sum += static_cast<double>(b.loss) * b.samples;
    correct += b.correct;
    samples += b.samples;
  }
  EXPECT_DOUBLE_EQ(acc.loss_sum, loss_sum);
  EXPECT_DOUBLE_EQ(acc.correct, correct);
  EXPECT_DOUBLE_EQ(acc.samples, samples);
  EXPECT_DOUBLE_EQ(acc.batches, 3.0);
  EXPECT_NEAR(acc.loss_sum / acc.samples, (2.5 * 128 + 1.25 * 128 + 0.5 * 37) / 293.0, 1e-12);
  // clear resets the accumulators (CLEAR_METRICS)
  OpCall clr(FR_OP_CLEAR, FR_U8);
  clr.rout(pod_range(acc));
  ASSERT_TRUE(clr.run());
  EXPECT_EQ(acc.loss_sum, 0.0);
  EXPECT_EQ(acc.batches, 0.0);
}

TEST(CpuAccumulateMetrics, SmallRangesAreErrors) {
  FrBatchResults b{1.0f, 1.0f, 1.0f, 0.0f};
  FrMetricAccumulators acc{};
  OpCall c(FR_OP_ACCUMULATE_METRICS, FR_U8);
  c.rin(pod_range(b)).rout(range(&acc, 16, FR_U8));
  EXPECT_TRUE(fresco::test::contains(c.run_error(), "too small")) << c.run_error();
  OpCall none(FR_OP_ACCUMULATE_METRICS, FR_U8);
  none.rout(pod_range(acc));
  EXPECT_TRUE(fresco::test::contains(none.run_error(), "expected at least")) << none.run_error();
}

// Runs lr_schedule for `step` and returns the scalars it wrote.
FrStepScalars schedule(const FrScheduleParams& p, int32_t step, std::vector<float>* table = nullptr) {
  FrStepScalars s{};
  s.lr = -1.0f;
  s.loss_scale = 1.0f;
  s.step = step;
  s.skip_step = 0;
  s.seed_lo = 11;
  s.seed_hi = 22;
  s.epoch = 3;
  OpCall c(FR_OP_LR_SCHEDULE, FR_U8);
  c.rout(pod_range(s)).params(p);
  if (table) c.rin(range(*table));
  EXPECT_TRUE(c.run());
  return s;
}

FrScheduleParams sched(int32_t kind, int32_t warmup, int32_t total, float base, float min_lr,
                       int32_t len = 0) {
  FrScheduleParams p{};
  p.kind = kind;
  p.warmup_steps = warmup;
  p.total_steps = total;
  p.base_lr = base;
  p.min_lr = min_lr;
  p.table_len = len;
  return p;
}

TEST(CpuLrSchedule, ConstantWithAndWithoutWarmup) {
  for (int32_t warmup : {0, 1, 5}) {
    const FrScheduleParams p = sched(FR_SCHED_CONSTANT, warmup, 0, 0.1f, 0.0f);
    for (int32_t step = 0; step < 12; ++step) {
      const FrStepScalars s = schedule(p, step);
      EXPECT_NEAR(s.lr, fresco::ref::constant_lr(0.1, warmup, step), 1e-7)
          << "warmup " << warmup << " step " << step;
      // Only lr is written.
      EXPECT_EQ(s.step, step);
      EXPECT_EQ(s.loss_scale, 1.0f);
      EXPECT_EQ(s.seed_lo, 11u);
      EXPECT_EQ(s.seed_hi, 22u);
      EXPECT_EQ(s.epoch, 3);
    }
  }
}

TEST(CpuLrSchedule, CosineWithWarmup) {
  struct C {
    int32_t warmup, total;
    float base, min_lr;
  };
  for (const C& k :
       {C{0, 100, 0.1f, 0.0f}, C{5, 50, 1e-3f, 1e-5f}, C{10, 10, 0.5f, 0.01f}, C{1, 937, 0.2f, 0.0f}}) {
    const FrScheduleParams p = sched(FR_SCHED_COSINE, k.warmup, k.total, k.base, k.min_lr);
    for (int32_t step = 0; step < k.total + 5; ++step) {
      const double ref = fresco::ref::cosine_lr(k.base, k.min_lr, k.warmup, k.total, step);
      EXPECT_NEAR(schedule(p, step).lr, ref, 1e-6 * k.base + 1e-12)
          << "warmup " << k.warmup << " total " << k.total << " step " << step;
    }
    // Known points: the first warm-up step, the peak, and the end (clamped at min_lr afterwards).
    if (k.warmup > 0) {
      EXPECT_FLOAT_EQ(schedule(p, 0).lr, k.base / static_cast<float>(k.warmup));
    }
    EXPECT_FLOAT_EQ(schedule(p, k.warmup).lr, k.total > k.warmup ? k.base : k.min_lr);
    EXPECT_FLOAT_EQ(schedule(p, k.total + 100).lr, k.min_lr);
  }
}

TEST(CpuLrSchedule, CosineMidpointIsTheMean) {
  const FrScheduleParams p = sched(FR_SCHED_COSINE, 0, 100, 0.1f, 0.02f);
  EXPECT_NEAR(schedule(p, 50).lr, 0.06, 1e-7);
}

TEST(CpuLrSchedule, TableClampsAtItsEnd) {
  std::vector<float> table = {0.5f, 0.25f, 0.125f, 0.0625f, 0.01f};
  const FrScheduleParams p = sched(FR_SCHED_TABLE, 0, 0, 9.0f, 0.0f, 5);
  for (int32_t step = 0; step < 9; ++step)
    EXPECT_EQ(schedule(p, step, &table).lr, static_cast<float>(fresco::ref::table_lr(table, 9.0, step)))
        << "step " << step;
  // An empty table falls back to base_lr (the kernel still needs no range then).
  std::vector<float> empty;
  EXPECT_EQ(schedule(sched(FR_SCHED_TABLE, 0, 0, 0.3f, 0.0f, 0), 4, &empty).lr, 0.3f);
}

TEST(CpuLrSchedule, BadInputsReturnErrors) {
  std::vector<float> table = {0.5f, 0.25f};
  FrStepScalars s{};
  {
    OpCall c(FR_OP_LR_SCHEDULE, FR_U8);  // table shorter than table_len
    c.rout(pod_range(s)).rin(range(table)).params(sched(FR_SCHED_TABLE, 0, 0, 0.1f, 0.0f, 3));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "table range too small")) << c.run_error();
  }
  {
    OpCall c(FR_OP_LR_SCHEDULE, FR_U8);  // table kind without a table
    c.rout(pod_range(s)).params(sched(FR_SCHED_TABLE, 0, 0, 0.1f, 0.0f, 2));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "table range too small")) << c.run_error();
  }
  {
    OpCall c(FR_OP_LR_SCHEDULE, FR_U8);  // params of the wrong size
    const float base = 0.1f;
    c.rout(pod_range(s)).raw_params(&base, sizeof(base));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_LR_SCHEDULE, FR_U8);  // no scalars range
    c.params(sched(FR_SCHED_CONSTANT, 0, 0, 0.1f, 0.0f));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
}

TEST(CpuStepDone, AdvancesTheStepCountsAppliedUpdatesAndClearsSkip) {
  FrStepScalars s{};
  s.lr = 0.125f;
  s.loss_scale = 65536.0f;
  s.step = 41;
  s.updates = 40;
  s.skip_step = 1;
  s.seed_lo = 5;
  s.seed_hi = 6;
  s.epoch = 2;
  FrStepScalars expected = s;
  expected.skip_step = 0;  // a skipped (loss-scaled) step has been accounted for
  for (int i = 0; i < 3; ++i) {
    OpCall c(FR_OP_STEP_DONE, FR_U8);
    c.rout(pod_range(s));
    ASSERT_TRUE(c.run());
    expected.step += 1;
    if (i > 0) expected.updates += 1;  // the first call ends a skipped step: no update was applied
    EXPECT_EQ(std::memcmp(&s, &expected, sizeof(s)), 0) << "after " << i + 1 << " calls, step " << s.step;
  }
  OpCall none(FR_OP_STEP_DONE, FR_U8);
  EXPECT_TRUE(fresco::test::contains(none.run_error(), "expected at least")) << none.run_error();
}

TEST(CpuLrSchedule, ScheduleThenStepDoneWalksTheSchedule) {
  // lr_schedule (start of OPTIMIZER) then step_done (end of OPTIMIZER), 30 times, on the same scalars.
  const FrScheduleParams p = sched(FR_SCHED_COSINE, 3, 30, 0.1f, 0.001f);
  FrStepScalars s{};
  for (int32_t i = 0; i < 30; ++i) {
    OpCall a(FR_OP_LR_SCHEDULE, FR_U8);
    a.rout(pod_range(s)).params(p);
    ASSERT_TRUE(a.run());
    EXPECT_NEAR(s.lr, fresco::ref::cosine_lr(0.1, 0.001, 3, 30, i), 1e-7) << "step " << i;
    OpCall b(FR_OP_STEP_DONE, FR_U8);
    b.rout(pod_range(s));
    ASSERT_TRUE(b.run());
  }
  EXPECT_EQ(s.step, 30);
}

}  // namespace

// cast_range f32 -> bf16 -> f32 and f32 -> f16: round to nearest even, NaN kept; different element counts are
// an error. (The compute op `cast` shares the conversion; fresco-plugin-check runs it.)
TEST(CpuCastRange, RoundsToNearestEvenAndKeepsNaN) {
  std::vector<float> x = {
      1.0f,     1.00390625f /* halfway in bf16: to even 1.0 */, 1.01171875f /* to 1.015625 */, -3.3f,
      65504.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<uint16_t> low(x.size(), 0);
  std::vector<float> back(x.size(), 0.0f);
  OpCall down(FR_OP_CAST_RANGE, FR_BF16);
  down.rin(range(x.data(), x.size() * 4, FR_F32)).rout(range(low.data(), low.size() * 2, FR_BF16));
  ASSERT_TRUE(down.run());
  OpCall up(FR_OP_CAST_RANGE, FR_F32);
  up.rin(range(low.data(), low.size() * 2, FR_BF16)).rout(range(back.data(), back.size() * 4, FR_F32));
  ASSERT_TRUE(up.run());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[2], 1.015625f);
  EXPECT_EQ(back[3], -3.296875f);
  EXPECT_EQ(back[4], 65536.0f);
  EXPECT_TRUE(std::isnan(back[5]));
  std::vector<uint16_t> half(x.size(), 0);
  OpCall h(FR_OP_CAST_RANGE, FR_F16);
  h.rin(range(x.data(), x.size() * 4, FR_F32)).rout(range(half.data(), half.size() * 2, FR_F16));
  ASSERT_TRUE(h.run());
  EXPECT_EQ(half[0], 0x3c00u);  // 1.0
  EXPECT_EQ(half[4], 0x7bffu);  // 65504, the largest f16
  OpCall bad(FR_OP_CAST_RANGE, FR_BF16);
  bad.rin(range(x.data(), x.size() * 4, FR_F32)).rout(range(low.data(), (low.size() - 1) * 2, FR_BF16));
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "different element counts")) << bad.run_error();
}

// unscale_grads with an f16 / bf16 source: the gradient cast and the unscale in one pass, and an inf in the
// source sets skip_step.
TEST(CpuLossScaling, UnscaleCastsAndChecksALowPrecisionSource) {
  for (FrDType low : {FR_F16, FR_BF16}) {
    // 1.5, -2.0 and inf in either format
    const std::vector<uint16_t> src = low == FR_F16 ? std::vector<uint16_t>{0x3e00u, 0xc000u, 0x7c00u}
                                                    : std::vector<uint16_t>{0x3fc0u, 0xc000u, 0x7f80u};
    std::vector<float> g(src.size(), 0.0f);
    FrStepScalars s{};
    s.loss_scale = 4.0f;
    OpCall unscale(FR_OP_UNSCALE_GRADS, FR_F32);
    unscale
        .rin(range(const_cast<uint16_t*>(src.data()), 4, low))  // the first two values
        .rout(range(g.data(), 8, FR_F32))
        .rout(pod_range(s));
    ASSERT_TRUE(unscale.run());
    EXPECT_EQ(g[0], 0.375f);
    EXPECT_EQ(g[1], -0.5f);
    EXPECT_EQ(s.skip_step, 0);
    OpCall all(FR_OP_UNSCALE_GRADS, FR_F32);
    all.rin(range(const_cast<uint16_t*>(src.data()), 6, low))
        .rout(range(g.data(), 12, FR_F32))
        .rout(pod_range(s));
    ASSERT_TRUE(all.run());
    EXPECT_TRUE(std::isinf(g[2]));
    EXPECT_EQ(s.skip_step, 1);
    OpCall bad(FR_OP_UNSCALE_GRADS, FR_F32);
    bad.rin(range(const_cast<uint16_t*>(src.data()), 6, low))
        .rout(range(g.data(), 8, FR_F32))
        .rout(pod_range(s));
    EXPECT_TRUE(fresco::test::contains(bad.run_error(), "different element counts")) << bad.run_error();
  }
}

// Dynamic loss scaling as the fp16 step runs it (unscale_grads -> sgd_update -> loss_scale_update ->
// step_done), PyTorch GradScaler semantics: an inf gradient leaves the weights unchanged that step and halves
// the scale; 2000 clean steps double it.
TEST(CpuLossScaling, InfSkipsTheStepAndHalvesTheScaleCleanStepsGrowIt) {
  FrStepScalars s{};
  s.lr = 0.1f;
  s.loss_scale = 65536.0f;
  std::vector<float> w = {1.0f, 2.0f, 3.0f, 4.0f}, m(4, 0.0f);
  const FrLossScaleParams lsp{2.0f, 0.5f, 2000, 0};
  auto step = [&](std::vector<float> g) {
    OpCall unscale(FR_OP_UNSCALE_GRADS, FR_F32);
    unscale.rout(range(g.data(), g.size() * 4, FR_F32)).rout(pod_range(s));
    EXPECT_TRUE(unscale.run());
    OpCall sgd(FR_OP_SGD_UPDATE, FR_F32);
    sgd.rin(range(g.data(), g.size() * 4, FR_F32))
        .rin(pod_range(s))
        .rout(range(w.data(), w.size() * 4, FR_F32))
        .rout(range(m.data(), m.size() * 4, FR_F32))
        .params(FrSgdParams{0.9f, 0.0f, 1, 0});
    EXPECT_TRUE(sgd.run());
    OpCall update(FR_OP_LOSS_SCALE_UPDATE, FR_U8);
    update.rout(pod_range(s)).params(lsp);
    EXPECT_TRUE(update.run());
    OpCall done(FR_OP_STEP_DONE, FR_U8);
    done.rout(pod_range(s));
    EXPECT_TRUE(done.run());
    return g;
  };
  // A clean step: gradients come back to true scale and the weights move.
  const auto g1 = step({65536.0f, -65536.0f, 0.0f, 131072.0f});
  EXPECT_EQ(g1[0], 1.0f);
  EXPECT_EQ(g1[3], 2.0f);
  EXPECT_NE(w[0], 1.0f);
  EXPECT_EQ(s.loss_scale, 65536.0f);
  EXPECT_EQ(s.growth_tracker, 1);
  // An inf: weights and momentum untouched, scale halved, tracker reset; step_done cleared the flag.
  const std::vector<float> w_before = w, m_before = m;
  step({1.0f, std::numeric_limits<float>::infinity(), 1.0f, 1.0f});
  EXPECT_EQ(w, w_before);
  EXPECT_EQ(m, m_before);
  EXPECT_EQ(s.loss_scale, 32768.0f);
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.skip_step, 0);
  // NaN too.
  step({std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(s.loss_scale, 16384.0f);
  // 2000 clean steps double the scale (and the 1999th does not).
  for (int i = 0; i < 1999; ++i) step({0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(s.loss_scale, 16384.0f);
  EXPECT_EQ(s.growth_tracker, 1999);
  step({0.0f, 0.0f, 0.0f, 0.0f});
  EXPECT_EQ(s.loss_scale, 32768.0f);
  EXPECT_EQ(s.growth_tracker, 0);
}
