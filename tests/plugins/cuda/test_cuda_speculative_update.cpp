// CompileOptions::speculative_update on CUDA (fp16): the conv weights updated during the backward, with
// backups restored by restore_if_skipped on a skipped step, train to the same bits as the update at the
// step's end, a step whose gradients overflow included: its weights and buffers stay as they were, the loss
// scale is halved and the skipped update is not counted (there every gradient overflows, so the parts' own
// checks skip their updates; the restore of an update that ran is the by-hand graph's, below, as on the
// CPU in tests/e2e/test_speculative_restore_cpu.cpp). Skipped without a GPU. The op itself:
// fresco-plugin-check (apps/plugin_check/cases/step_cases.cpp) and
// tests/plugins/cpu/test_restore_if_skipped.cpp.
#include <string>
#include <vector>

#include "e2e/small_residual_task.h"
#include "e2e/speculative_restore_case.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;
using namespace fresco::gpu_test;

namespace {
FrStepScalars scalars_of(DeepLearningTask& t) {
  FrStepScalars s{};
  t.runtime().download(t.compiled().base_plan(), t.compiled().t.step_scalars, &s, sizeof(s));
  return s;
}
void set_loss_scale(DeepLearningTask& t, float scale) {
  FrStepScalars s = scalars_of(t);
  s.loss_scale = scale;
  t.runtime().upload(t.compiled().base_plan(), t.compiled().t.step_scalars, &s, sizeof(s));
}
// The conv weights' f32 gradients exist only without update_from_grads16: left out of the comparison.
test::Snapshot without_conv_grads(const test::Snapshot& s) {
  test::Snapshot out;
  for (const auto& e : s)
    if (e.first.rfind("G(conv", 0) != 0) out.push_back(e);
  return out;
}
int restores(const DeepLearningTask& t) {
  int n = 0;
  for (const GraphNode& g : t.compiled().train->nodes(GraphId::OPTIMIZER))
    n += g.op == FR_OP_RESTORE_IF_SKIPPED ? 1 : 0;
  return n;
}
}  // namespace

TEST(CudaLowPrecision, SpeculativeUpdateGivesTheSameBitsAndUndoesASkippedStep) {
  FRESCO_REQUIRE_GPU();
  // Every compile takes the same algorithms (the GEMMs' from one tuning file, cuDNN's heuristic choices).
  const TempPath tuning("fresco_speculative_update_");
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  using SU = CompileOptions::SpeculativeUpdate;
  using SB = CompileOptions::SpeculativeBackups;
  struct Mode {
    SU su;
    int parts;
    int64_t lag = 0;      // CompileOptions::conv_join_lag_max
    bool grads16 = true;  // CompileOptions::update_from_grads16
    SB backups = SB::IN_UPDATE;
  };
  const std::vector<Mode> modes = {{SU::OFF, 0},
                                   {SU::ON, 0},
                                   {SU::ON, 2},
                                   {SU::ON, 2, int64_t{1} << 20},
                                   {SU::ON, 2, 0, false},
                                   {SU::ON, 5},
                                   {SU::ON, 5, 0, true, SB::COPIES}};
  std::vector<float> want_losses;
  test::Snapshot want;
  FrStepScalars want_scalars{};
  for (const Mode& mode : modes) {
    DeepLearningTask t;
    test::configure_small_residual(t);
    t.device("cuda").precision(DType::F16).early_update_parts(mode.parts).speculative_update(mode.su);
    t.speculative_backups(mode.backups);
    t.conv_join_lag(mode.lag).update_from_grads16(mode.grads16 ? CompileOptions::Grads16Update::ON
                                                               : CompileOptions::Grads16Update::OFF);
    t.compile();
    const std::string what = std::string("speculative ") + (mode.su == SU::OFF ? "off" : "on") + " parts " +
                             std::to_string(mode.parts) + " lag " + std::to_string(mode.lag) +
                             (mode.grads16 ? " grads16" : " grad casts") +
                             (mode.backups == SB::COPIES ? " backup copies" : "");
    EXPECT_EQ(t.compiled().speculative, mode.su == SU::ON) << what;
    EXPECT_EQ(restores(t) > 0, t.compiled().speculative) << what;
    std::vector<float> losses = test::train_small_residual(t, 2);
    // a step whose scaled gradients overflow fp16: skipped
    const FrStepScalars before_scalars = scalars_of(t);
    set_loss_scale(t, 1e38f);
    const test::Snapshot before = t.snapshot();
    const std::vector<uint32_t> first_half = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    losses.push_back(t.train_step(first_half.data(), 16));
    const test::Snapshot after = t.snapshot();
    const FrStepScalars s = scalars_of(t);
    EXPECT_EQ(s.updates, before_scalars.updates) << what << ": the skipped update was counted";
    EXPECT_EQ(s.step, before_scalars.step + 1) << what;
    EXPECT_EQ(s.loss_scale, 1e38f * 0.5f) << what;
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i)
      if (after[i].first.rfind("G(", 0) != 0) {
        EXPECT_EQ(after[i].second, before[i].second) << what << ": " << after[i].first << " changed";
      }
    set_loss_scale(t, 1024.0f);
    for (float l : test::train_small_residual(t, 3)) losses.push_back(l);
    const test::Snapshot state = without_conv_grads(t.snapshot());
    const FrStepScalars end = scalars_of(t);
    EXPECT_EQ(end.updates, 5) << what;
    if (mode.su == SU::OFF) {
      want_losses = losses, want = state, want_scalars = end;
      EXPECT_NE(losses.front(), losses.back()) << what;
      continue;
    }
    EXPECT_EQ(losses, want_losses) << what;
    EXPECT_EQ(end.loss_scale, want_scalars.loss_scale) << what;
    ASSERT_EQ(state.size(), want.size()) << what;
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_EQ(state[i].first, want[i].first);
      EXPECT_EQ(state[i].second, want[i].second) << what << " " << state[i].first;
    }
  }
}

TEST(CudaLowPrecision, ALaterOverflowUndoesTheEarlyUpdate) {
  FRESCO_REQUIRE_GPU();
  using test::Overflow;
  for (bool in_update : {true, false})
    for (Overflow how : {Overflow::LATE, Overflow::EARLY, Overflow::NONE}) {
      SCOPED_TRACE(std::string(in_update ? "backups in the update" : "backup copies") + ", overflow " +
                   std::to_string(static_cast<int>(how)));
      const test::SpeculativeRestoreRun r = test::run_speculative_restore("cuda", how, in_update);
      test::expect_restore_outcome(r, how);
      if (how ==
          Overflow::NONE) {  // the CPU's update, within the GPU's contractions (as CudaOps compares them)
        const test::SpeculativeRestoreRun cpu = test::run_speculative_restore("cpu", how, in_update);
        EXPECT_LT(test::max_rel_diff(r.w, cpu.w), 1e-6);
        EXPECT_LT(test::max_rel_diff(r.m, cpu.m), 1e-6);
      }
    }
}
