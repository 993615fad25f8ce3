// The CPU's restore_if_skipped (ops.h; CompileOptions::speculative_update): on a skipped step every
// destination gets its source's bytes and each group's 16-bit weight copy the cast of its restored weights
// (bf16 and f16, as cast_range rounds); on a step that was not skipped nothing is written; malformed
// operands are refused. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"

namespace {

using fresco::test::OpCall;
using fresco::test::pod_range;
using fresco::test::range;

// f32 -> f16 bits (round to nearest even), the compiler's conversion.
uint16_t f16_bits(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct Group {
  std::vector<float> keep_w, keep_m, w, m;
  std::vector<uint16_t> copy;
};
Group make_group(size_t n, float at) {
  Group g;
  for (size_t i = 0; i < n; ++i) {
    g.keep_w.push_back(at + 0.37f * static_cast<float>(i) - 3.1f);
    g.keep_m.push_back(-at + 0.011f * static_cast<float>(i));
  }
  g.w.assign(n, 9.0f);
  g.m.assign(n, -9.0f);
  g.copy.assign(n, 0xffffu);
  return g;
}

void run_restore(std::vector<Group>& groups, FrStepScalars& s, uint32_t copy_dtype, bool copies) {
  OpCall c(FR_OP_RESTORE_IF_SKIPPED, FR_U8);
  for (Group& g : groups)
    c.rin(range(g.keep_w.data(), g.keep_w.size() * 4, FR_F32))
        .rin(range(g.keep_m.data(), g.keep_m.size() * 4, FR_F32));
  c.rin(pod_range(s));
  for (Group& g : groups) {
    c.rout(range(g.w.data(), g.w.size() * 4, FR_F32)).rout(range(g.m.data(), g.m.size() * 4, FR_F32));
    if (copies) c.rout(range(g.copy.data(), g.copy.size() * 2, copy_dtype));
  }
  c.params(FrRestoreParams{2, copies ? 1 : 0});
  ASSERT_TRUE(c.run());
}
}  // namespace

TEST(CpuRestoreIfSkipped, PutsBackTheBackupsAndRecastsTheCopiesOnASkippedStep) {
  for (uint32_t dt : {FR_BF16, FR_F16}) {
    std::vector<Group> groups = {make_group(1000, 1.0f), make_group(3, 2.0f)};
    FrStepScalars s{};
    s.skip_step = 1;
    run_restore(groups, s, dt, true);
    for (const Group& g : groups) {
      EXPECT_EQ(g.w, g.keep_w);
      EXPECT_EQ(g.m, g.keep_m);
      for (size_t i = 0; i < g.w.size(); ++i)
        ASSERT_EQ(g.copy[i], dt == FR_BF16 ? bf16_bits(g.keep_w[i]) : f16_bits(g.keep_w[i])) << i;
    }
  }
}

TEST(CpuRestoreIfSkipped, WritesNothingOnATakenStep) {
  std::vector<Group> groups = {make_group(100, 1.0f)};
  FrStepScalars s{};
  run_restore(groups, s, FR_BF16, true);
  EXPECT_EQ(groups[0].w, std::vector<float>(100, 9.0f));
  EXPECT_EQ(groups[0].m, std::vector<float>(100, -9.0f));
  EXPECT_EQ(groups[0].copy, std::vector<uint16_t>(100, 0xffffu));
  std::vector<Group> plain = {make_group(7, 3.0f)};  // without copies, skipped
  s.skip_step = 1;
  run_restore(plain, s, FR_BF16, false);
  EXPECT_EQ(plain[0].w, plain[0].keep_w);
  EXPECT_EQ(plain[0].copy, std::vector<uint16_t>(7, 0xffffu));
}

TEST(CpuRestoreIfSkipped, RefusesMalformedOperands) {
  std::vector<float> a(8, 1.0f), b(8, 2.0f), shorter(4, 0.0f);
  std::vector<uint16_t> copy(8, 0);
  FrStepScalars s{};
  s.skip_step = 1;
  auto call = [&](FrRestoreParams p, bool short_dst, bool with_copy, uint32_t copy_dtype) {
    OpCall c(FR_OP_RESTORE_IF_SKIPPED, FR_U8);
    c.rin(range(a.data(), 32, FR_F32)).rin(pod_range(s));
    c.rout(short_dst ? range(shorter.data(), 16, FR_F32) : range(b.data(), 32, FR_F32));
    if (with_copy) c.rout(range(copy.data(), 16, copy_dtype));
    c.params(p);
    return c.run_error();
  };
  EXPECT_EQ(call({1, 0}, false, false, FR_BF16), "");
  EXPECT_NE(call({1, 0}, true, false, FR_BF16).find("bytes"), std::string::npos);       // sizes differ
  EXPECT_NE(call({0, 0}, false, false, FR_BF16).find("per_group"), std::string::npos);  // bad params
  EXPECT_NE(call({1, 1}, false, false, FR_BF16).find("range outputs"), std::string::npos);
  EXPECT_NE(call({1, 1}, false, true, FR_F32).find("weight copy"), std::string::npos);
  EXPECT_NE(call({2, 0}, false, false, FR_BF16).find("groups of 2"), std::string::npos);
}
