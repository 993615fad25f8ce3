// The 16-bit gradients of ops.h (FR_KERNEL_HALF_GRADS; CompileOptions::update_from_grads16) on the CPU:
// sgd_update and adam_update reading f16 / bf16 gradients give the bits of unscale_grads' cast form followed
// by the update on the f32 gradients (a loss scale of 1024 and of 1, a skipped step, with the weight copy),
// and refuse gradients of another count; check_grads sets skip_step exactly where unscale_grads does (an
// inf, a NaN, a value that overflows once unscaled) and stores nothing else. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"

namespace {

using fresco::test::OpCall;
using fresco::test::pod_range;
using fresco::test::range;

// f32 values cast to a 16-bit dtype by cast_range.
std::vector<uint16_t> cast16(std::vector<float> x, uint32_t dt) {
  std::vector<uint16_t> out(x.size());
  OpCall c(FR_OP_CAST_RANGE, dt);
  c.rin(range(x)).rout(range(out.data(), 2 * out.size(), dt));
  EXPECT_TRUE(c.run());
  return out;
}

}  // namespace

TEST(CpuGrads16, UpdatesFromHalfGradsGiveTheBitsOfTheUnscaleCastFirst) {
  const size_t n = 3 * 16384 + 5;  // several chunks
  for (uint32_t dt : {uint32_t{FR_F16}, uint32_t{FR_BF16}})
    for (float scale : {1024.0f, 1.0f})
      for (int which = 0; which < 3; ++which) {  // sgd nesterov, plain sgd, adamw
        const std::string name = std::string(which == 2   ? "adamw"
                                             : which == 1 ? "sgd"
                                                          : "sgd nesterov") +
                                 (dt == FR_F16 ? " f16" : " bf16") + " scale " + std::to_string(scale);
        std::mt19937 rng(5);
        std::vector<float> w = fresco::test::random_floats(rng, n, -1.0f, 1.0f), m(n, 0.0f), v(n, 0.0f);
        std::vector<float> w2 = w, m2 = m, v2 = v;  // the run on the unscaled f32 gradients
        std::vector<uint16_t> copy(n), copy2(n);
        FrStepScalars s{};
        s.loss_scale = scale;
        for (int step = 0; step < 3; ++step) {
          const std::vector<uint16_t> g16 = cast16(fresco::test::random_floats(rng, n, -scale, scale), dt);
          std::vector<float> g(n);
          FrStepScalars us = s;
          OpCall unscale(FR_OP_UNSCALE_GRADS, FR_F32);
          unscale.rin(range(const_cast<uint16_t*>(g16.data()), 2 * n, dt)).rout(range(g)).rout(pod_range(us));
          ASSERT_TRUE(unscale.run());
          s.lr = 0.1f / static_cast<float>(step + 1);
          s.skip_step = step == 1 ? 1 : 0;
          for (bool half : {true, false}) {
            OpCall c(which == 2 ? FR_OP_ADAM_UPDATE : FR_OP_SGD_UPDATE);
            c.rout(range(half ? w : w2));
            if (which != 1) c.rout(range(half ? m : m2));
            if (which == 2) c.rout(range(half ? v : v2));
            c.rout(range(half ? copy.data() : copy2.data(), 2 * n, dt));
            if (half)
              c.rin(range(const_cast<uint16_t*>(g16.data()), 2 * n, dt));
            else
              c.rin(range(g));
            c.rin(pod_range(s));
            if (which == 2)
              c.params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, 0});
            else
              c.params(FrSgdParams{which == 0 ? 0.9f : 0.0f, 5e-4f, which == 0 ? 1 : 0, 0});
            ASSERT_TRUE(c.run()) << name;
          }
          EXPECT_TRUE(fresco::test::bitwise_equal(w, w2)) << name << " step " << step;
          EXPECT_TRUE(fresco::test::bitwise_equal(m, m2)) << name << " step " << step;
          EXPECT_TRUE(fresco::test::bitwise_equal(v, v2)) << name << " step " << step;
          EXPECT_TRUE(copy == copy2) << name << " step " << step;
          s.updates += step == 1 ? 0 : 1;  // a skipped step counts no update (step_done's part)
        }
      }
  std::vector<float> w(16, 1.0f), buf(16);
  std::vector<uint16_t> short16(15);
  FrStepScalars s{};
  s.loss_scale = 1.0f;
  for (const char* op : {FR_OP_SGD_UPDATE, FR_OP_ADAM_UPDATE}) {
    OpCall c(op);
    std::vector<float> m(16), v(16);
    c.rout(range(w)).rout(range(m));
    if (std::string(op) == FR_OP_ADAM_UPDATE) c.rout(range(v));
    c.rin(range(short16.data(), 30, FR_F16)).rin(pod_range(s));
    if (std::string(op) == FR_OP_ADAM_UPDATE)
      c.params(FrAdamParams{0.9f, 0.999f, 1e-8f, 0.0f, 0, 0});
    else
      c.params(FrSgdParams{0.9f, 0, 0, 0});
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "do not hold one 2-byte value per weight"))
        << c.run_error();
  }
}

TEST(CpuGrads16, CheckGradsFlagsWhereUnscaleDoes) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const size_t n = 3 * 32768 + 7;  // several chunks; the odd value last
  struct Case {
    float odd, scale;
    const char* what;
  };
  // 0.5: a scale below one unscales 3e38 past the largest float
  for (const Case& k : {Case{0.25f, 4.0f, "finite"}, Case{inf, 4.0f, "inf"}, Case{nan, 4.0f, "NaN"},
                        Case{3e38f, 0.5f, "overflow once unscaled"}})
    for (uint32_t dt : {uint32_t{FR_F32}, uint32_t{FR_F16}, uint32_t{FR_BF16}}) {
      if (dt != FR_F32 && k.odd == 3e38f) continue;  // no 16-bit value unscales past the float range
      const std::string name = std::string(k.what) + " dtype " + std::to_string(dt);
      std::mt19937 rng(9);
      std::vector<float> x = fresco::test::random_floats(rng, n, -1.0f, 1.0f);
      x.back() = k.odd;
      std::vector<uint16_t> x16 = dt == FR_F32 ? std::vector<uint16_t>{} : cast16(x, dt);
      void* data = dt == FR_F32 ? static_cast<void*>(x.data()) : static_cast<void*>(x16.data());
      const size_t bytes = dt == FR_F32 ? 4 * n : 2 * n;
      FrStepScalars s{}, us{};
      s.loss_scale = us.loss_scale = k.scale;
      s.lr = 0.5f;
      const FrStepScalars before = s;
      OpCall check(FR_OP_CHECK_GRADS, dt);
      check.rin(range(data, bytes, dt)).rout(pod_range(s));
      ASSERT_TRUE(check.run()) << name;
      std::vector<float> g(n);
      OpCall unscale(FR_OP_UNSCALE_GRADS, FR_F32);
      if (dt == FR_F32) {
        g = x;
      } else {
        unscale.rin(range(data, bytes, dt));
      }
      unscale.rout(range(g)).rout(pod_range(us));
      ASSERT_TRUE(unscale.run()) << name;
      EXPECT_EQ(s.skip_step, us.skip_step) << name;
      EXPECT_EQ(s.skip_step, std::string(k.what) == "finite" ? 0 : 1) << name;
      FrStepScalars rest = s;
      rest.skip_step = 0;
      EXPECT_EQ(std::memcmp(&rest, &before, sizeof rest), 0) << name << ": more than the flag written";
    }
  std::vector<uint8_t> odd(3);
  FrStepScalars s{};
  OpCall bad(FR_OP_CHECK_GRADS, FR_F16);
  bad.rin(range(odd.data(), 3, FR_F16)).rout(pod_range(s));
  EXPECT_TRUE(fresco::test::contains(bad.run_error(), "whole number of elements")) << bad.run_error();
}
