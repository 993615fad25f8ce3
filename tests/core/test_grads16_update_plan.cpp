// CompileOptions::update_from_grads16 (ON; AUTO, the default, in fp16 only) in the Compiler: in mixed
// precision the updates of conv weights read their 16-bit gradients (G16) themselves (ops.h, the 16-bit
// gradients), so the conv weights have no f32 gradients and no node of the step writes any (G16 -> G casts,
// fp16's unscale_grads cast form); fp16 checks G16 with check_grads instead, over the whole conv span exactly
// once, before OPTIMIZER. LARS and the option off keep the casts. The kernels' numbers:
// tests/plugins/cpu/test_grads16.cpp and the CUDA tests (the same bits as cast then update).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fresco/core/compiler.h"
#include "small_compile_options.h"
#include "update_cases.h"

using namespace fresco;

namespace {
using Spans = std::vector<std::pair<uint64_t, uint64_t>>;

// [lo, hi) of a range over the conv kinds' span of its family, in that span's bytes.
std::pair<uint64_t, uint64_t> span_of(const RangeRef& r, uint64_t span_bytes) {
  return {r.skip, r.take < 0 ? span_bytes : r.skip + static_cast<uint64_t>(r.take)};
}

// Whether `spans` tile [from, to) exactly once.
bool tiles(Spans spans, uint64_t from, uint64_t to) {
  std::sort(spans.begin(), spans.end());
  uint64_t at = from;
  for (const auto& [lo, hi] : spans) {
    if (lo != at) return false;
    at = hi;
  }
  return at == to;
}

bool conv_region(Region r, Family f) {
  return r == param_region(f, ParamKind::FIRST_CONV) || r == param_region(f, ParamKind::DEEP_CONV);
}
}  // namespace

TEST(Grads16UpdatePlan, UpdatesReadTheConvGradientsAndFp16ChecksThemOnce) {
  using G16 = CompileOptions::Grads16Update;
  EXPECT_EQ(CompileOptions{}.update_from_grads16, G16::AUTO);  // the default: fp16 only (AutoIsFp16Only)
  using EU = CompileOptions::EarlyUpdate;
  const std::vector<test::UpdateCase> cases = {
      {DType::BF16, EU::AUTO, 0},
      {DType::BF16, EU::AUTO, 2},
      {DType::BF16, EU::OFF, 0},
      {DType::BF16, EU::AUTO, 2, 1},
      {DType::BF16, EU::AUTO, 0, 2},
      {DType::BF16, EU::AUTO, 2, 0, true},
      {DType::BF16, EU::AUTO, 2, 0, false, false},
      {DType::BF16, EU::AUTO, 0, 0, false, true, CompileOptions::DeferredUpdate::ON},
      {DType::F16, EU::AUTO, 0},
      {DType::F16, EU::AUTO, 2, 2},
      {DType::F16, EU::OFF, 0, 1, true},
      {DType::F16, EU::AUTO, 0, 0, false, false},
      {DType::F16, EU::AUTO, 0, 0, false, true, CompileOptions::DeferredUpdate::ON}};
  for (const test::UpdateCase& c : cases) {
    SCOPED_TRACE(test::update_case_name(c));
    CompileOptions o = test::update_case_options(c);
    o.update_from_grads16 = CompileOptions::Grads16Update::ON;
    const CompiledModel m = Compiler().compile(test::small_residual_blueprint(), o);
    const MemoryPlan& p = m.base_plan();
    const RegionSpan conv = p.region_range(Region::W_FIRST_CONV, Region::W_DEEP_CONV);
    const uint64_t conv16 = p.region_range(Region::G16_FIRST_CONV, Region::G16_DEEP_CONV).bytes;
    ASSERT_EQ(conv16 * 2, conv.bytes);
    // no f32 gradients for the conv weights: 4 bytes a conv weight less memory
    EXPECT_EQ(p.region_range(Region::G_FIRST_CONV, Region::G_DEEP_CONV).bytes, 0u);
    EXPECT_TRUE(m.updates_read_grads16());
    Spans reads, checks;  // the updates' G16 reads and fp16's checks, in G16 bytes of the conv span
    bool optimizer_seen = false;
    for (int g = 0; g < kGraphIdCount; ++g) {
      const auto gid = static_cast<GraphId>(g);
      if (gid == GraphId::WEIGHT_CAST) continue;  // outside the step
      optimizer_seen = optimizer_seen || gid == GraphId::OPTIMIZER;
      for (const GraphNode& n : m.train->nodes(gid)) {
        for (const RangeRef& r : n.rout)
          EXPECT_FALSE(conv_region(r.first, Family::G) || conv_region(r.last, Family::G))
              << n.label << " writes the f32 conv gradients";
        if (n.op == "check_grads") {
          EXPECT_EQ(c.precision, DType::F16) << n.label;
          EXPECT_FALSE(optimizer_seen) << n.label << " after the updates";
          ASSERT_EQ(n.rin.size(), 1u);
          EXPECT_EQ(n.rin[0].first, Region::G16_FIRST_CONV);
          EXPECT_EQ(n.rin[0].last, Region::G16_DEEP_CONV);
          EXPECT_EQ(n.rin[0].dtype, DType::F16);
          checks.push_back(span_of(n.rin[0], conv16));
          continue;
        }
        if (n.op != "sgd_update" && n.op != "adam_update") continue;
        const RangeRef& w = n.rout[0];
        const RegionSpan group = p.region_range(w.first, w.last);
        const uint64_t lo = group.offset + w.skip;  // arena offsets
        if (lo < conv.offset) {                     // stored before the first conv: f32 gradients
          EXPECT_EQ(n.rin[0].dtype, DType::F32) << n.label;
          continue;
        }
        EXPECT_EQ(n.rin[0].first, Region::G16_FIRST_CONV) << n.label;
        EXPECT_EQ(n.rin[0].last, Region::G16_DEEP_CONV) << n.label;
        EXPECT_EQ(n.rin[0].dtype, c.precision) << n.label;
        EXPECT_EQ(n.rin[0].skip, (lo - conv.offset) / 2) << n.label;
        EXPECT_EQ(n.rin[0].take, w.take < 0 ? -1 : w.take / 2) << n.label;
        reads.push_back(span_of(n.rin[0], conv16));
      }
    }
    // a frozen first conv (stored first) is no update's; every other conv gradient is read once
    const uint64_t first16 = c.freeze ? p.tensor(m.arch.layers[0].weight).slot_bytes / 2 : 0;
    EXPECT_TRUE(tiles(reads, first16, conv16)) << "the updates' G16 reads leave a gap or overlap";
    if (c.precision == DType::F16)
      EXPECT_TRUE(tiles(checks, 0, conv16)) << "the checks leave a gap or overlap";
    else
      EXPECT_TRUE(checks.empty());
  }
}

// LARS (its trust ratios read the f32 gradients) and the option off keep the G16 -> G casts.
TEST(Grads16UpdatePlan, LarsAndTheOptionOffKeepTheCasts) {
  for (int which : {0, 1}) {
    for (DType precision : {DType::BF16, DType::F16}) {
      CompileOptions o = test::small_compile_options(8);
      o.precision = precision;
      if (which == 0)
        o.optimizer = LARS(0.9f, 0.02f).with_weight_decay(1e-4f);
      else
        o.update_from_grads16 = CompileOptions::Grads16Update::OFF;
      const CompiledModel m = Compiler().compile(test::small_residual_blueprint(), o);
      EXPECT_FALSE(m.updates_read_grads16());
      EXPECT_GT(m.base_plan().region_range(Region::G_FIRST_CONV, Region::G_DEEP_CONV).bytes, 0u);
      int casts = 0;
      for (int g = 0; g < kGraphIdCount; ++g) {
        if (static_cast<GraphId>(g) == GraphId::WEIGHT_CAST) continue;
        for (const GraphNode& n : m.train->nodes(static_cast<GraphId>(g))) {
          EXPECT_NE(n.op, "check_grads");
          if (n.op == "sgd_update" || n.op == "adam_update" || n.op == "lars_update") {
            EXPECT_EQ(n.rin[0].dtype, DType::F32) << n.label;
          }
          for (const RangeRef& r : n.rout) casts += conv_region(r.first, Family::G) ? 1 : 0;
        }
      }
      EXPECT_GE(casts, 1) << (which == 0 ? "LARS " : "off ") << dtype_name(precision);
    }
  }
}

// AUTO (the default) reads G16 in fp16 only: bf16 keeps its casts (measured slower with the option,
// docs/performance.md), fp32 has no 16-bit gradients; ON takes bf16 too.
TEST(Grads16UpdatePlan, AutoIsFp16Only) {
  using G16 = CompileOptions::Grads16Update;
  for (DType precision : {DType::F32, DType::BF16, DType::F16})
    for (G16 mode : {G16::AUTO, G16::ON, G16::OFF}) {
      CompileOptions o = test::small_compile_options(8);
      o.precision = precision;
      o.update_from_grads16 = mode;
      const CompiledModel m = Compiler().compile(test::small_residual_blueprint(), o);
      const bool want =
          precision != DType::F32 && (mode == G16::ON || (mode == G16::AUTO && precision == DType::F16));
      EXPECT_EQ(m.updates_read_grads16(), want)
          << dtype_name(precision) << " mode " << static_cast<int>(mode);
      EXPECT_EQ(m.base_plan().region_range(Region::G_FIRST_CONV, Region::G_DEEP_CONV).bytes == 0, want);
    }
}
