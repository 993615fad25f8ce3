// CompileOptions::speculative_update's mechanism by hand (SimpleTask), for the CPU
// (test_speculative_restore_cpu.cpp) and CUDA (test_cuda_speculative_update.cpp): a part's f16 gradients
// checked, w and its buffer kept in backups (by the update itself, ops.h's backups, or by copy nodes before
// it: CompileOptions::speculative_backups), the part updated early (sgd_update with its f16 weight copy),
// then a later check (unscale_grads on f32 gradients, as fp16's batchnorm and fc gradients are) that finds
// an inf when `overflow` is LATE, and restore_if_skipped, the loss scale's update and step_done. With LATE
// the early check passes, so only the restore can put the part back (the compiled training runs overflow
// every gradient at once, where the parts' own checks already skip their updates); with EARLY the part's own
// gradients hold an inf, its update skips, and its backups must still hold what the restore writes back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fresco/core/task.h"
#include "fresco/ops.h"
#include "graph_nodes.h"

namespace fresco::test {

enum class Overflow { NONE, EARLY, LATE };

struct SpeculativeRestoreRun {
  std::vector<float> w0, m0, w, m;  // before and after the step
  std::vector<uint16_t> copy;       // the f16 weight copy after it
  std::vector<uint16_t> copy_of_w;  // the f16 bits of w after it
  FrStepScalars s{};
};

inline uint16_t f16_bits_of(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

inline SpeculativeRestoreRun run_speculative_restore(const std::string& device, Overflow overflow,
                                                     bool in_update) {
  constexpr int64_t n = 1000;
  SimpleTask t(device);
  auto tensor = [&](DType d, int64_t count, const char* name) {
    return t.tensor(Region::T_TEMP, d, Shape{1, 1, 1, count}, name);
  };
  const TensorId g16 = tensor(DType::F16, n, "g16"), w = tensor(DType::F32, n, "w"),
                 m = tensor(DType::F32, n, "m"), a = tensor(DType::F16, n, "a"),
                 bw = tensor(DType::F16, 2 * n, "backup w"), bm = tensor(DType::F16, 2 * n, "backup m"),
                 late = tensor(DType::F32, 4, "late g"),
                 sc = tensor(DType::U8, static_cast<int64_t>(sizeof(FrStepScalars)), "scalars");
  t.lock_memory();
  auto r = [](TensorId id, DType d) { return RangeRef::values_of(id, d); };
  const RangeRef G16 = r(g16, DType::F16), W = r(w, DType::F32), M = r(m, DType::F32), A = r(a, DType::F16),
                 BW = r(bw, DType::F16), BM = r(bm, DType::F16), LATE = r(late, DType::F32),
                 S = RangeRef::of(sc, DType::U8);
  const auto node = range_node;
  const GraphId g = GraphId::DEEP_FWD_BWD;
  t.add(g, node(FR_OP_CHECK_GRADS, {G16}, {S}));
  if (in_update) {
    t.add(g, node(FR_OP_SGD_UPDATE, {G16, S}, {W, M, A, BW, BM}).with_params(FrSgdParams{0.9f, 5e-4f, 1, 1}));
  } else {
    t.add(g, node(FR_OP_COPY, {W}, {BW}));
    t.add(g, node(FR_OP_COPY, {M}, {BM}));
    t.add(g, node(FR_OP_SGD_UPDATE, {G16, S}, {W, M, A}).with_params(FrSgdParams{0.9f, 5e-4f, 1, 0}));
  }
  t.add(g, node(FR_OP_UNSCALE_GRADS, {}, {LATE, S}));
  t.add(g, node(FR_OP_RESTORE_IF_SKIPPED, {BW, BM, S}, {W, M, A}).with_params(FrRestoreParams{2, 1}));
  t.add(g, node(FR_OP_LOSS_SCALE_UPDATE, {}, {S}).with_params(FrLossScaleParams{2.0f, 0.5f, 2000, 0}));
  t.add(g, node(FR_OP_STEP_DONE, {}, {S}));
  t.compile();
  SpeculativeRestoreRun out;
  std::vector<uint16_t> grads(n), stale(n);
  for (int64_t i = 0; i < n; ++i) {
    out.w0.push_back(0.25f * static_cast<float>(i % 17) - 2.0f);
    out.m0.push_back(0.01f * static_cast<float>(i % 5) - 0.02f);
    grads[static_cast<size_t>(i)] = f16_bits_of(1024.0f * (0.003f * static_cast<float>(i % 23) - 0.03f));
    stale[static_cast<size_t>(i)] = f16_bits_of(out.w0.back());  // the copy the step starts with
  }
  if (overflow == Overflow::EARLY) grads[7] = 0x7C00;  // +inf in f16
  out.s.lr = 0.1f;
  out.s.loss_scale = 1024.0f;
  t.write(sc, &out.s, sizeof out.s);
  t.write(w, out.w0);
  t.write(m, out.m0);
  t.write(g16, grads);
  t.write(a, stale);
  const float inf = std::numeric_limits<float>::infinity();
  t.write(late, std::vector<float>{1.0f, overflow == Overflow::LATE ? inf : 2.0f, 3.0f, 4.0f});
  t.run(g);
  out.w = t.read<float>(w, n);
  out.m = t.read<float>(m, n);
  out.copy = t.read<uint16_t>(a, n);
  for (float v : out.w) out.copy_of_w.push_back(f16_bits_of(v));
  t.read(sc, &out.s, sizeof out.s);
  return out;
}

// What the step leaves: after an overflow the weights and buffer as before it, the update not counted and the
// scale halved; otherwise both updated, one update counted, the scale kept; the f16 copy the cast of the
// weights either way, and the skip flag cleared by step_done.
inline void expect_restore_outcome(const SpeculativeRestoreRun& r, Overflow how) {
  const bool overflow = how != Overflow::NONE;
  if (overflow) {
    EXPECT_EQ(r.w, r.w0);
    EXPECT_EQ(r.m, r.m0);
  } else {
    EXPECT_NE(r.w, r.w0);
    EXPECT_NE(r.m, r.m0);
  }
  EXPECT_EQ(r.copy, r.copy_of_w);
  EXPECT_EQ(r.s.updates, overflow ? 0 : 1);
  EXPECT_EQ(r.s.loss_scale, overflow ? 512.0f : 1024.0f);
  EXPECT_EQ(r.s.skip_step, 0);
}

}  // namespace fresco::test
