// Low-precision training on CUDA: the fused batchnorm prologue, join prologue and join epilogue train like
// the separate passes, the compact shortcut gradient like the full-size one, fp16's loss scaling skips an
// inf step and halves the scale, and the early and the deferred update give the same bits as the update at
// the step's end. Skipped without a GPU.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "e2e/small_residual_task.h"
#include "plugins/cuda/gpu_fixture.h"
#include "plugins/cuda/low_precision_case.h"
#include "reference/batchnorm.h"

using namespace fresco;
using namespace fresco::gpu_test;

// CompileOptions::conv_prologue on the GPU gives the bits of the separate apply pass: a network with a
// stage-1 residual block (64 channels, 32 wide: fresco's Hopper kernels apply the prologue to their windows
// on compute capability 9.0, cuDNN after the prologue's own pass elsewhere) and the small residual network
// (8 and 16 channels: the prologue's own pass), in bf16 and fp16, six SGD steps each, prologue on against
// off, both with grad_sums off. With grad_sums (AUTO) the conv that applies a batchnorm only it reads also
// writes that batchnorm's masked gradient and gradient sums from its input gradient (ops.h: in fresco's
// kernel as it stores dx, else by the masking pass after cuDNN): the sums are added in another order than
// the batchnorm's own pass adds them (and handed over in f32), so that training is compared within rounding
// instead: losses and weights (not gradients and momenta, which a cancelling sum makes as sensitive as the
// last bits). Measured on the H200 after six steps: bf16 within 2.3e-5 (0 through the masking pass); in f16
// the hand-over's last bits change the rounding of some dx from the third step on, and this tiny network on
// random data amplifies them: losses within 2e-4, conv weights within 1.3% and batchnorm parameters within 3%
// of their ranges, the same through the masking pass after cuDNN, whose partials are the batchnorm's own bit
// for bit (so it is the f32 hand-over, not the kernel's order). The kernel's own values are checked exactly
// in tests/plugins/cuda/ops/test_conv3x3_wgmma.cpp.
namespace {
// Two low-precision trainings that differ only in the rounding of batchnorm's gradient sums (added in
// another order): losses within 2e-3, the weights (not gradients or momenta) within 1e-3 of each tensor's
// largest value in bf16 (fp16, whose loss scale makes the sums' last bits matter more: 3e-2, batchnorm's
// 6e-2).
void expect_trains_within_rounding(const std::string& what, DType precision, const std::vector<float>& losses,
                                   const test::Snapshot& state, const std::vector<float>& want_losses,
                                   const test::Snapshot& want) {
  // relative to the loss and to each tensor's largest value: [0] conv and fc weights, [1] batchnorm's
  double loss_diff = 0.0, diff[2] = {0.0, 0.0};
  std::string worst[2];
  for (size_t s = 0; s < losses.size(); ++s)
    loss_diff = std::max(
        loss_diff, std::fabs(static_cast<double>(losses[s]) - want_losses[s]) / std::fabs(want_losses[s]));
  for (size_t i = 0; i < state.size(); ++i) {
    const std::string& name = state[i].first;
    if (name.rfind("G(", 0) == 0 || name.rfind("M(", 0) == 0) continue;
    const double d = test::max_rel_diff(state[i].second, want[i].second);
    const int k = name.rfind("bn", 0) == 0 ? 1 : 0;
    if (d > diff[k]) diff[k] = d, worst[k] = name;
  }
  std::printf(
      "[          ] %s: losses within %.3g, weights within %.3g (%s), batchnorm parameters within %.3g "
      "(%s)\n",
      what.c_str(), loss_diff, diff[0], worst[0].c_str(), diff[1], worst[1].c_str());
  const bool f16 = precision == DType::F16;
  EXPECT_LT(loss_diff, 2e-3) << what;
  EXPECT_LT(diff[0], f16 ? 3e-2 : 1e-3) << what;
  EXPECT_LT(diff[1], f16 ? 6e-2 : 1e-3) << what;
}

// The first training of a comparison (is_reference) becomes want_losses / want, after checking that it
// really trained; true then (the caller goes on to the next).
bool keep_reference(bool is_reference, const std::string& what, const std::vector<float>& losses,
                    const test::Snapshot& state, std::vector<float>& want_losses, test::Snapshot& want) {
  if (!is_reference) return false;
  want_losses = losses, want = state;
  EXPECT_NE(losses.front(), losses.back()) << what;
  return true;
}

// Random 32x32x3 images, four classes.
data::Dataset random_images(int64_t n, uint32_t seed) {
  data::Dataset d;
  d.name = "random 32x32x3";
  d.n = n, d.h = 32, d.w = 32, d.c = 3, d.num_classes = 4;
  d.images.resize(static_cast<size_t>(n * 32 * 32 * 3));
  for (auto& v : d.images) v = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(i % 4));
  return d;
}
}  // namespace

TEST(CudaLowPrecision, ConvPrologueGivesTheSameBits) {
  FRESCO_REQUIRE_GPU();
  const TempPath tuning("fresco_conv_prologue_");  // both compiles take the same algorithms
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0"),
      log("FRESCO_CUDNN_LOG", "1");
  for (bool stage1 : {true, false})
    for (DType precision : {DType::BF16, DType::F16}) {
      std::vector<float> want_losses;
      test::Snapshot want;
      for (int form = 0; form < 3; ++form) {  // off, on, on with the gradient epilogue
        const auto mode = form == 0 ? CompileOptions::ConvPrologue::OFF : CompileOptions::ConvPrologue::ON;
        DeepLearningTask t;
        test::configure_small_residual(t);
        if (stage1)
          t.model(seq({conv(64, 3, 1, 1), bn(), relu(),
                       residual({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn()}), relu(), gap(),
                       fc(4)}))
              .data(random_images(32, 7), random_images(16, 8));
        t.device("cuda").precision(precision).conv_prologue(mode).grad_sums(
            form == 2 ? CompileOptions::GradSums::AUTO : CompileOptions::GradSums::OFF);
        testing::internal::CaptureStderr();
        t.compile();
        const std::string err = testing::internal::GetCapturedStderr();
        const std::string what = std::string(stage1 ? "stage-1 block " : "small residual ") +
                                 dtype_name(precision) +
                                 (form == 0   ? " apply pass"
                                  : form == 1 ? " prologue"
                                              : " gradient epilogue");
        int stats_only = 0, epilogues = 0;
        for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
          stats_only += n.op == FR_OP_BATCHNORM && n.out.size() == 2;
          epilogues += n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 8;
        }
        EXPECT_EQ(epilogues, form == 2 ? (stage1 ? 1 : 2) : 0) << what;
        const bool on = mode == CompileOptions::ConvPrologue::ON;
        EXPECT_EQ(stats_only, on ? (stage1 ? 2 : 3) : 0) << what;
        if (form == 1 && stage1)
          std::printf("[          ] %s: %s\n", what.c_str(),
                      err.find("wgmma kernels for the forward") != std::string::npos
                          ? "in fresco's kernels"
                          : "as a pass of its own (not a compute capability 9.0 device)");
        const std::vector<float> losses = test::train_small_residual(t, 6);
        const test::Snapshot state = t.snapshot();
        if (keep_reference(!on, what, losses, state, want_losses, want)) continue;
        ASSERT_EQ(state.size(), want.size());
        if (form == 1) {
          EXPECT_EQ(losses, want_losses) << what;
          for (size_t i = 0; i < state.size(); ++i)
            EXPECT_EQ(state[i].second, want[i].second) << what << " " << state[i].first;
          continue;
        }
        expect_trains_within_rounding(what, precision, losses, state, want_losses, want);
      }
    }
}

// CompileOptions::join_epilogue on fresco's Hopper input gradient: in a stage-1 network of two identity
// blocks (64 channels, 32 wide) the masking passes at the stem's relu and the first block's join go into the
// input gradients of the blocks' first convs, whose dx bits are the passes' (the kernel test checks them)
// and whose gradient sums are added in another order: the training agrees within that rounding.
TEST(CudaLowPrecision, JoinEpilogueTrainsLikeThePasses) {
  FRESCO_REQUIRE_GPU();
  const TempPath tuning("fresco_join_epilogue_");  // both compiles take the same algorithms
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  auto block = [] { return residual({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn()}); };
  for (DType precision : {DType::BF16, DType::F16}) {
    std::vector<float> want_losses;
    test::Snapshot want;
    for (const auto mode : {CompileOptions::JoinEpilogue::OFF, CompileOptions::JoinEpilogue::AUTO}) {
      DeepLearningTask t;
      test::configure_small_residual(t);
      t.model(seq({conv(64, 3, 1, 1), bn(), relu(), block(), relu(), block(), relu(), gap(), fc(4)}))
          .data(random_images(32, 7), random_images(16, 8))
          .device("cuda")
          .precision(precision)
          .join_epilogue(mode);
      t.compile();
      int epilogues = 0;
      for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
        epilogues += n.op == FR_OP_CONV2D_BACKWARD && n.in.size() == 6;
      const bool on = mode != CompileOptions::JoinEpilogue::OFF;
      const std::string what = std::string(dtype_name(precision)) + (on ? " join epilogue" : " passes");
      EXPECT_EQ(epilogues, on ? 2 : 0) << what;
      const std::vector<float> losses = test::train_small_residual(t, 6);
      const test::Snapshot state = t.snapshot();
      if (keep_reference(!on, what, losses, state, want_losses, want)) continue;
      ASSERT_EQ(state.size(), want.size());
      expect_trains_within_rounding(what, precision, losses, state, want_losses, want);
    }
  }
}

// CompileOptions::compact_shortcut_grads on the GPU: the small residual network's projection shortcut (1x1,
// stride 2) writes its input gradient at its output positions only and the join's pass adds it there, and
// in bf16 (subsampled_shortcuts AUTO) reads its join's even rows and columns at stride 1; cuDNN's stride-1
// plans may add in another order than its stride-2 ones, so the training is compared within rounding (bf16
// and fp16, grad_sums AUTO: on).
TEST(CudaLowPrecision, CompactShortcutGradsTrainLikeTheFullSizePart) {
  FRESCO_REQUIRE_GPU();
  const TempPath tuning("fresco_compact_shortcut_");  // both compiles take the same algorithms
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  for (DType precision : {DType::BF16, DType::F16}) {
    std::vector<float> want_losses;
    test::Snapshot want;
    for (const auto mode :
         {CompileOptions::CompactShortcutGrads::OFF, CompileOptions::CompactShortcutGrads::AUTO}) {
      DeepLearningTask t;
      test::configure_small_residual(t);
      t.data(random_images(32, 7), random_images(16, 8)).device("cuda").precision(precision);
      t.compact_shortcut_grads(mode);
      t.compile();
      int compact = 0, subsampled = 0;
      for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
        compact += n.op == FR_OP_ADD_RELU_BACKWARD && !n.params.empty();
        subsampled += n.op == FR_OP_BATCHNORM_ADD && n.out.size() == 4;
      }
      const bool on = mode != CompileOptions::CompactShortcutGrads::OFF;
      const std::string what =
          std::string(dtype_name(precision)) + (on ? " compact part" : " full-size part");
      EXPECT_EQ(compact, on ? 1 : 0) << what;
      EXPECT_EQ(subsampled, on && precision == DType::BF16 ? 1 : 0) << what;
      const std::vector<float> losses = test::train_small_residual(t, 6);
      const test::Snapshot state = t.snapshot();
      if (keep_reference(!on, what, losses, state, want_losses, want)) continue;
      ASSERT_EQ(state.size(), want.size());
      expect_trains_within_rounding(what, precision, losses, state, want_losses, want);
    }
  }
}

// The fp16 loss-scaling sequence on the device: an inf gradient skips the update (weights unchanged) and
// halves the scale; a clean step unscales and updates.
TEST(CudaLowPrecision, LossScalingSkipsAnInfStepAndHalvesTheScale) {
  FRESCO_REQUIRE_GPU();
  SimpleTask t("cuda");
  const TensorId g = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 4}, "g");
  const TensorId w = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 4}, "w");
  const TensorId m = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 4}, "m");
  const TensorId sc = t.tensor(Region::T_TEMP, DType::U8, Shape{1, 1, 1, sizeof(FrStepScalars)}, "scalars");
  t.lock_memory();
  const RangeRef G = RangeRef::of(g, DType::F32), W = RangeRef::of(w, DType::F32),
                 M = RangeRef::of(m, DType::F32), S = RangeRef::of(sc, DType::U8);
  t.add(GraphId::DEEP_FWD_BWD, range_node(FR_OP_UNSCALE_GRADS, {}, {G, S}));
  GraphNode sgd = range_node(FR_OP_SGD_UPDATE, {G, S}, {W, M});
  sgd.with_params(FrSgdParams{0.9f, 0.0f, 1, 0});
  t.add(GraphId::DEEP_FWD_BWD, sgd);
  GraphNode update = range_node(FR_OP_LOSS_SCALE_UPDATE, {}, {S});
  update.with_params(FrLossScaleParams{2.0f, 0.5f, 2000, 0});
  t.add(GraphId::DEEP_FWD_BWD, update);
  t.add(GraphId::DEEP_FWD_BWD, range_node(FR_OP_STEP_DONE, {}, {S}));
  t.compile();
  FrStepScalars s{};
  s.lr = 0.1f;
  s.loss_scale = 65536.0f;
  t.write(sc, &s, sizeof s);
  const std::vector<float> w0 = {1.0f, 2.0f, 3.0f, 4.0f};
  t.write(w, w0);
  t.write(m, std::vector<float>(4, 0.0f));
  t.write(g, std::vector<float>{1.0f, std::numeric_limits<float>::infinity(), 1.0f, 1.0f});
  t.run(GraphId::DEEP_FWD_BWD);
  t.read(sc, &s, sizeof s);
  EXPECT_EQ(t.read<float>(w, 4), w0);
  EXPECT_EQ(s.loss_scale, 32768.0f);
  EXPECT_EQ(s.growth_tracker, 0);
  EXPECT_EQ(s.skip_step, 0);  // cleared by step_done for the next step
  EXPECT_EQ(s.step, 1);       // the step counts (lr schedule) ...
  EXPECT_EQ(s.updates, 0);    // ... the skipped update does not (Adam's bias correction)
  t.write(g, std::vector<float>{32768.0f, -32768.0f, 0.0f, 65536.0f});
  t.run(GraphId::DEEP_FWD_BWD);
  t.read(sc, &s, sizeof s);
  EXPECT_EQ(t.read<float>(g, 4), (std::vector<float>{1.0f, -1.0f, 0.0f, 2.0f}));
  EXPECT_NE(t.read<float>(w, 4), w0);
  EXPECT_EQ(s.loss_scale, 32768.0f);
  EXPECT_EQ(s.growth_tracker, 1);
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.updates, 1);
}

// The early update (CompileOptions::early_update, on by default for a first conv in mixed precision): in
// bf16 the deep gradients' cast, their update and the weights' cast at the end of DEEP_FWD_BWD on the side
// stream (and with early_update_parts the last layers' on the detached stream during the backward, also with
// lagged joins), in fp16
// their cast and unscale there (the update waits for every gradient's check), give the same bits as doing it
// all after the first layer's backward; and so do the updates that write the weights' 16-bit copies
// themselves (CompileOptions::fused_weight_cast, the default) against the casts after them, early or late,
// and the updates that read the 16-bit gradients themselves (CompileOptions::update_from_grads16 ON, the
// default in fp16; fp16 then checks them with check_grads) against the casts before them (the f32 gradients,
// which the conv weights have only without the option, are left out of the comparison).
TEST(CudaLowPrecision, EarlyUpdateGivesTheSameBits) {
  FRESCO_REQUIRE_GPU();
  // Both compiles take the same algorithms: the GEMMs' from one tuning file, cuDNN's heuristic first choices.
  const TempPath tuning("fresco_early_update_");
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  struct Mode {
    bool early;
    int parts;
    const char* range_ops;  // DEEP_FWD_BWD's range ops, in order
    int64_t join_lag = 0;   // CompileOptions::conv_join_lag_max: the parts then wait for a later join
    bool fused = true;      // CompileOptions::fused_weight_cast
    bool grads16 = true;    // CompileOptions::update_from_grads16
  };
  for (DType precision : {DType::BF16, DType::F16}) {
    const bool bf16 = precision == DType::BF16;
    std::vector<Mode> modes = {
        {false, 0, "", 0, false},
        {false, 0, ""},
        {false, 0, "", 0, true, false},
        {true, 0, bf16 ? "sgd_update " : "check_grads "},
        {true, 0, bf16 ? "cast_range sgd_update " : "unscale_grads ", 0, true, false},
        {true, 0, bf16 ? "sgd_update cast_range " : "check_grads ", 0, false},
        {true, 0, bf16 ? "cast_range sgd_update cast_range " : "unscale_grads ", 0, false, false}};
    if (bf16) {  // parts: checked by their detached nodes
      modes.push_back({true, 2, nullptr});
      modes.push_back({true, 2, nullptr, int64_t{1} << 20});
      modes.push_back({true, 2, nullptr, 0, false});
      modes.push_back({true, 2, nullptr, 0, true, false});
    }
    std::vector<float> want_losses;
    test::Snapshot want;
    for (const Mode& mode : modes) {
      DeepLearningTask t;
      test::configure_small_residual(t);
      t.device("cuda").precision(precision).early_update(mode.early).early_update_parts(mode.parts);
      t.conv_join_lag(mode.join_lag)
          .fused_weight_cast(mode.fused)
          .update_from_grads16(mode.grads16 ? CompileOptions::Grads16Update::ON
                                            : CompileOptions::Grads16Update::OFF);
      t.compile();
      const std::vector<float> losses = test::train_small_residual(t, 6);
      std::string ops;
      int detached = 0;
      for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD)) {
        if (n.kind == NodeKind::RANGE) ops += n.op + " ";
        detached += n.detached ? 1 : 0;
      }
      const std::string what = std::string(dtype_name(precision)) + (mode.early ? " early" : " late") +
                               " parts " + std::to_string(mode.parts) + " lag " +
                               std::to_string(mode.join_lag) + (mode.fused ? " fused" : " casts") +
                               (mode.grads16 ? " grads16" : " grad casts");
      const int per_part =
          (mode.grads16 ? 1 : 2) + (mode.fused ? 0 : 1);  // [grad cast,] update[, weight cast]
      if (mode.range_ops)
        EXPECT_EQ(ops, mode.range_ops) << what;
      else
        EXPECT_TRUE(detached >= per_part && detached % per_part == 0)
            << what << ": " << detached << " detached nodes";
      const test::Snapshot state = t.snapshot();
      if (keep_reference(&mode == &modes.front(), what, losses, state, want_losses, want)) continue;
      EXPECT_EQ(losses, want_losses) << what;
      // the conv weights' f32 gradients are left out: they exist only without grads16
      auto without_grads = [](const test::Snapshot& s) {
        test::Snapshot out;
        for (const auto& e : s)
          if (e.first.rfind("G(conv", 0) != 0) out.push_back(e);
        return out;
      };
      const test::Snapshot got = without_grads(state), expected = without_grads(want);
      ASSERT_EQ(got.size(), expected.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, expected[i].first);
        EXPECT_EQ(got[i].second, expected[i].second) << what << " " << got[i].first;
      }
    }
  }
}

// CompileOptions::deferred_update (ON; AUTO is off): each step's update runs at the start of the next step,
// the conv weights past the first layers' on the update stream beside the forward, which waits for them at
// the first conv that reads them; the last one after the epoch. Trained through run() (three epochs of two
// steps, an lr that changes every step), deferred and not, in fp16 and bf16: the same losses, the same
// weights, buffers and step scalars, bit for bit. The CPU form of the test (where nothing overlaps):
// tests/e2e/test_deferred_update_cpu.cpp.
TEST(CudaLowPrecision, DeferredUpdateGivesTheSameBits) {
  FRESCO_REQUIRE_GPU();
  const TempPath tuning("fresco_deferred_update_");
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  using DU = CompileOptions::DeferredUpdate;
  for (DType precision : {DType::F16, DType::BF16}) {
    std::vector<float> want_losses;
    test::Snapshot want;
    std::string want_checkpoint;  // its bytes: also batchnorm's statistics and the step scalars
    for (DU mode : {DU::OFF, DU::ON}) {
      DeepLearningTask t;
      test::configure_small_residual(t);
      t.device("cuda").precision(precision).epochs(3).scheduler(CosineAnnealingLR().warmup(1));
      t.deferred_update(mode);
      t.compile();
      EXPECT_EQ(t.compiled().update_deferred(), mode == DU::ON);
      std::vector<float> losses;
      for (const EpochReport& e : t.run().epochs) losses.push_back(static_cast<float>(e.train_loss));
      const test::Snapshot state = t.snapshot();
      const TempPath ckpt("fresco_deferred_ckpt_");
      const std::string checkpoint = test::checkpoint_bytes(t, ckpt.path);
      const std::string what =
          std::string(dtype_name(precision)) + (mode == DU::ON ? " deferred" : " at the end");
      if (mode == DU::OFF) want_checkpoint = checkpoint;
      if (keep_reference(mode == DU::OFF, what, losses, state, want_losses, want)) continue;
      EXPECT_EQ(losses, want_losses) << what;
      EXPECT_FALSE(checkpoint.empty());
      EXPECT_TRUE(checkpoint == want_checkpoint) << what << ": the checkpoints differ";
      ASSERT_EQ(state.size(), want.size());
      for (size_t i = 0; i < state.size(); ++i) {
        EXPECT_EQ(state[i].first, want[i].first);
        EXPECT_EQ(state[i].second, want[i].second) << what << " " << state[i].first;
      }
    }
  }
}

// CompileOptions::join_prologue on the GPU gives batchnorm_add's bits: in a stage-1 network of two identity
// blocks (64 channels, 32 wide: on compute capability 9.0 fresco's Hopper kernel adds the first block's join
// to its windows, reading the residual from memory; elsewhere the prologue's own pass) and in the small
// residual network (the prologue's own pass before cuDNN), in bf16 and fp16, six SGD steps with the product's
// other defaults (the join epilogue, whose mask is the join's map the conv now writes) but the subsampled
// shortcuts (a join applied by a conv writes no subsampled map, and the shortcut's strided form may add in
// another order), join prologue ON against OFF: the same losses and every tensor the same bits.
TEST(CudaLowPrecision, JoinPrologueGivesTheSameBits) {
  FRESCO_REQUIRE_GPU();
  const TempPath tuning("fresco_join_prologue_");  // both compiles take the same algorithms
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0");
  auto block = [] { return residual({conv(64, 3, 1, 1), bn(), relu(), conv(64, 3, 1, 1), bn()}); };
  for (bool stage1 : {true, false})
    for (DType precision : {DType::BF16, DType::F16}) {
      std::vector<float> want_losses;
      test::Snapshot want;
      for (const auto mode : {CompileOptions::JoinPrologue::OFF, CompileOptions::JoinPrologue::ON}) {
        DeepLearningTask t;
        test::configure_small_residual(t);
        if (stage1)
          t.model(seq({conv(64, 3, 1, 1), bn(), relu(), block(), relu(), block(), relu(), gap(), fc(4)}))
              .data(random_images(32, 7), random_images(16, 8));
        t.device("cuda")
            .precision(precision)
            .conv_prologue(CompileOptions::ConvPrologue::ON)
            .subsampled_shortcuts(CompileOptions::SubsampledShortcuts::OFF)
            .fork_shortcuts(false)  // forked, the small network's projection shortcut reads its join first
            .join_prologue(mode);
        t.compile();
        int joins = 0;
        for (const GraphNode& n : t.compiled().train->nodes(GraphId::DEEP_FWD_BWD))
          joins += n.op == FR_OP_CONV2D && n.in.size() == 7;
        const bool on = mode == CompileOptions::JoinPrologue::ON;
        const std::string what = std::string(stage1 ? "stage-1 blocks " : "small residual ") +
                                 dtype_name(precision) + (on ? " join prologue" : " batchnorm_add");
        EXPECT_EQ(joins, on ? 1 : 0) << what;
        const std::vector<float> losses = test::train_small_residual(t, 6);
        const test::Snapshot state = t.snapshot();
        if (keep_reference(!on, what, losses, state, want_losses, want)) continue;
        EXPECT_EQ(losses, want_losses) << what;
        ASSERT_EQ(state.size(), want.size());
        for (size_t i = 0; i < state.size(); ++i)
          EXPECT_EQ(state[i].second, want[i].second) << what << " " << state[i].first;
      }
    }
}
