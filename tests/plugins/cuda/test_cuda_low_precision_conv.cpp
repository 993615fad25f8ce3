// The CUDA convolutions in f16 and bf16 against the same convolutions in f32 (test_cuda_low_precision.cpp
// says how): cuDNN on tensor cores and its tuning cache, the conv's batchnorm sums (fused and the separate
// pass), fresco's own narrow-input and Hopper 3x3 kernels, and the weight gradient's batchnorm prologue.
// Skipped without a GPU.
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

// Each shape twice: on the legacy API's algorithms and on cuDNN's backend engines (forced for these small
// shapes; by default only convolutions of 2^28 FLOPs or more use them).
TEST(CudaLowPrecision, Conv2dOnTensorCores) {
  FRESCO_REQUIRE_GPU();
  // ResNet-like shapes: 3x3 stride 1 and 2, 1x1 projection; channels multiples of 8 (tensor-core layouts).
  struct Geo {
    FrConvParams p;
    int64_t c, k;
  };
  for (const char* engines : {"0", "2"}) {
    SCOPED_TRACE(std::string("FRESCO_CUDNN_ENGINES=") + engines);
    ScopedEnv env("FRESCO_CUDNN_ENGINES", engines);
    for (const Geo& geo :
         {Geo{{3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, 32, 32}, Geo{{3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, 16, 32},
          Geo{{1, 1, 2, 2, 0, 0, 1, 1, 1, 0}, 16, 64}}) {
      const FrConvParams& p = geo.p;
      const int64_t n = 4, h = 8, w = 8;
      const int64_t oh = (h + 2 * p.pad_h - p.kh) / p.stride_h + 1,
                    ow = (w + 2 * p.pad_w - p.kw) / p.stride_w + 1;
      const Shape xs{n, h, w, geo.c}, ws{geo.k, p.kh, p.kw, geo.c}, ys{n, oh, ow, geo.k};
      const std::string what = "conv k" + std::to_string(p.kh) + " s" + std::to_string(p.stride_h);
      LowCase f{{{xs, Fill::RANDOM, true}, {ws, Fill::RANDOM, true}, {ys, Fill::ZERO, true}},
                node(FR_OP_CONV2D, {0, 1}, {2}),
                {2}};
      f.node.with_params(p);
      expect_close_to_f32(f, 1.6e-2, 2e-3, what);
      expect_close_to_f32(conv_backward_case(xs, ws, ys, p), 1.6e-2, 2e-3, what + " backward");
    }
  }
}

// cuDNN engine choices are kept in the tuning cache: the second run of the same f16 convolution takes the
// engine from the file without timing, and computes the same bits; with FRESCO_CUDNN_DETERMINISTIC=0 the
// engines are timed again (a key of its own).
TEST(CudaLowPrecision, ConvEngineChoicesComeBackFromTheTuningCache) {
  FRESCO_REQUIRE_GPU();
  const std::string path = testing::TempDir() + "fresco_conv_tuning_" + std::to_string(getpid()) + ".tsv";
  std::remove(path.c_str());
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", path), engines("FRESCO_CUDNN_ENGINES", "2"),
      log("FRESCO_CUDNN_LOG", "1");
  const FrConvParams p{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
  const Shape xs{8, 16, 16, 32}, ws{32, 3, 3, 32}, ys{8, 16, 16, 32};
  LowCase f{{{xs, Fill::RANDOM, true}, {ws, Fill::RANDOM, true}, {ys, Fill::ZERO, true}},
            node(FR_OP_CONV2D, {0, 1}, {2}),
            {2}};
  f.node.with_params(p);
  const auto v = values_of(f, DType::F16, 5);
  std::vector<std::vector<float>> out[2];
  for (int run = 0; run < 2; ++run) {
    testing::internal::CaptureStderr();
    out[run] = run_low(f, DType::F16, v);
    const std::string err = testing::internal::GetCapturedStderr();
    const bool timed = err.find(" configurations, ") != std::string::npos;  // a search that timed engines
    EXPECT_EQ(timed, run == 0) << err;
    if (run == 1) {
      EXPECT_NE(err.find("(tuning cache)"), std::string::npos) << err;
    }
  }
  EXPECT_EQ(out[0], out[1]);
  {  // a choice among deterministic engines is not reused where non-deterministic ones are admitted
    const ScopedEnv nondet("FRESCO_CUDNN_DETERMINISTIC", "0");
    testing::internal::CaptureStderr();
    (void)run_low(f, DType::F16, v);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(" configurations, "), std::string::npos) << err;
  }
  std::remove(path.c_str());
}

// conv2d's sums output (ops.h) in f16 / bf16 is the per-channel sum and sum of squares of y as stored, on
// cuDNN's fused statistics (FRESCO_CUDNN_GENSTATS=2, where an engine offers them) and on the separate pass
// (=0); y itself stays the convolution's (close to f32). The sums start random: they must be written, not
// added to (a training step reuses the buffer).
TEST(CudaLowPrecision, Conv2dSumsAreTheSumsOfTheStoredOutput) {
  FRESCO_REQUIRE_GPU();
  ScopedEnv engines("FRESCO_CUDNN_ENGINES", "2");
  const FrConvParams p{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
  const Shape xs{8, 16, 16, 64}, ws{64, 3, 3, 64}, ys{8, 16, 16, 64}, ss{1, 1, 1, 128};
  LowCase f{
      {{xs, Fill::RANDOM, true}, {ws, Fill::RANDOM, true}, {ys, Fill::ZERO, true}, {ss, Fill::RANDOM, false}},
      node(FR_OP_CONV2D, {0, 1}, {2, 3}),
      {2, 3}};
  f.node.with_params(p);
  for (const char* genstats : {"0", "2"}) {
    SCOPED_TRACE(std::string("FRESCO_CUDNN_GENSTATS=") + genstats);
    ScopedEnv env("FRESCO_CUDNN_GENSTATS", genstats);
    for (DType low : {DType::BF16, DType::F16}) {
      const auto v = values_of(f, low, 11);
      const auto ref = run_low(f, DType::F32, v);
      const auto got = run_low(f, low, v);
      EXPECT_LE(max_rel(got[0], ref[0]), low == DType::BF16 ? 1.6e-2 : 2e-3) << dtype_name(low) << " y";
      expect_sums_of_stored(got[0], got[1], 64, 0.0, dtype_name(low));  // f32 accumulation of 2048 terms
    }
  }
}

// The separate sums pass (channel_moments.h) over many chunks (4608 rows: 72 chunks of 64) and few (512
// rows), run after run of one compiled graph, each run with the sums output overwritten first, gives the same
// sums, those of y as stored.
TEST(CudaLowPrecision, Conv2dSumsPassGivesTheSameSumsEveryRun) {
  FRESCO_REQUIRE_GPU();
  const ScopedEnv engines("FRESCO_CUDNN_ENGINES", "2"), genstats("FRESCO_CUDNN_GENSTATS", "0");
  const FrConvParams p{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
  for (const int64_t n : {int64_t{18}, int64_t{2}}) {
    for (DType low : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(low)) + " n " + std::to_string(n));
      SimpleTask t("cuda");
      const TensorId x = t.tensor(Region::T_TEMP, low, Shape{n, 16, 16, 64}, "x");
      const TensorId w = t.tensor(Region::T_TEMP, low, Shape{64, 3, 3, 64}, "w");
      const TensorId y = t.tensor(Region::T_TEMP, low, Shape{n, 16, 16, 64}, "y");
      const TensorId sums = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 128}, "sums");
      t.lock_memory();
      t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_CONV2D, {x, w}, {y, sums}).with_params(p));
      t.compile();
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      auto random = [&](size_t count) {
        std::vector<float> v(count);
        for (float& f : v) f = d(rng);
        return v;
      };
      write_values(t, x, low, random(static_cast<size_t>(n * 16 * 16 * 64)));
      write_values(t, w, low, random(64 * 9 * 64));
      std::vector<float> first;
      for (int run = 0; run < 3; ++run) {
        t.write(sums, random(128));
        t.run(GraphId::DEEP_FWD_BWD);
        const auto yb = t.read<uint16_t>(y, static_cast<size_t>(n * 16 * 16 * 64));
        std::vector<float> yf(yb.size());
        for (size_t j = 0; j < yb.size(); ++j) yf[j] = from_low(low, yb[j]);
        const auto got = t.read<float>(sums, 128);
        expect_sums_of_stored(yf, got, 64, 0.0, "run " + std::to_string(run));
        if (run == 0) first = got;
        EXPECT_EQ(got, first) << "run " << run;
      }
    }
  }
}

// Convolutions with few input channels (a stem) run on fresco's own tensor-core kernels (ops/narrow_conv.h):
// forward with the sums output, and the weight gradient of a first layer (no dx), against the f32
// convolution on the same values; the sums against the sums of y as stored. Shapes cover 1-4 input channels,
// one and two k-steps of taps, stride, dilation, padding and row counts that are not whole tiles.
TEST(CudaLowPrecision, NarrowInputConvolutions) {
  FRESCO_REQUIRE_GPU();
  ScopedEnv narrow("FRESCO_CUDA_NARROW_CONV", "1"), log("FRESCO_CUDNN_LOG", "1");
  struct Geo {
    FrConvParams p;
    int64_t n, hw, c, k;
  };
  for (const Geo& geo : {Geo{{3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, 4, 11, 3, 64},  // CIFAR stem
                         Geo{{3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, 3, 13, 1, 32},  // grayscale stem
                         Geo{{3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, 2, 15, 3, 16},
                         Geo{{5, 5, 1, 1, 4, 4, 2, 2, 1, 0}, 2, 10, 1, 16},  // 25 taps, dilation 2
                         Geo{{2, 2, 2, 2, 0, 0, 1, 1, 1, 0}, 3, 9, 4, 64}}) {
    const FrConvParams& p = geo.p;
    const int64_t eff = p.dil_h * (p.kh - 1) + 1;
    const int64_t o = (geo.hw + 2 * p.pad_h - eff) / p.stride_h + 1;
    const Shape xs{geo.n, geo.hw, geo.hw, geo.c}, ws{geo.k, p.kh, p.kw, geo.c}, ys{geo.n, o, o, geo.k},
        ss{1, 1, 1, 2 * geo.k};
    const std::string what = "narrow conv c" + std::to_string(geo.c) + " k" + std::to_string(p.kh) + " s" +
                             std::to_string(p.stride_h) + " d" + std::to_string(p.dil_h) + " K" +
                             std::to_string(geo.k);
    SCOPED_TRACE(what);
    LowCase f{{{xs, Fill::RANDOM, true},
               {ws, Fill::RANDOM, true},
               {ys, Fill::ZERO, true},
               {ss, Fill::RANDOM, false}},
              node(FR_OP_CONV2D, {0, 1}, {2, 3}),
              {2, 3}};
    f.node.with_params(p);
    LowCase b{{{ys, Fill::RANDOM, true},
               {xs, Fill::RANDOM, true},
               {ws, Fill::RANDOM, true},
               {ws, Fill::ZERO, true}},
              node(FR_OP_CONV2D_BACKWARD, {0, 1, 2}, {3}),
              {3}};
    b.node.with_params(FrConvBackwardParams{p, 0, 0});
    for (DType low : {DType::BF16, DType::F16}) {
      const double tol = low == DType::BF16 ? 1.6e-2 : 2e-3;
      const auto v = values_of(f, low, 13);
      const auto ref = run_low(f, DType::F32, v);
      testing::internal::CaptureStderr();
      const auto got = run_low(f, low, v);
      const std::string err = testing::internal::GetCapturedStderr();
      EXPECT_NE(err.find("narrow kernels for the forward with sums"), std::string::npos) << err;
      EXPECT_LE(max_rel(got[0], ref[0]), tol) << dtype_name(low) << " y";
      expect_sums_of_stored(got[0], got[1], geo.k, 1e-6, dtype_name(low));
      const auto vb = values_of(b, low, 17);
      const auto ref_b = run_low(b, DType::F32, vb);
      testing::internal::CaptureStderr();
      const auto got_b = run_low(b, low, vb);
      const std::string err_b = testing::internal::GetCapturedStderr();
      EXPECT_NE(err_b.find("narrow kernels for the weight gradient"), std::string::npos) << err_b;
      EXPECT_LE(max_rel(got_b[0], ref_b[0]), tol) << dtype_name(low) << " dw";
      EXPECT_GT(max_rel(ref_b[0], std::vector<float>(ref_b[0].size(), 0.0f)), 0.0) << "dw is all zero";
    }
  }
}

// The weight gradient's batchnorm prologue (ops.h): conv2d_backward part 2 with y, gamma, save_mean,
// save_invstd and gsums gives the bits of batchnorm_backward's dx (premasked, with gsums) followed by the
// plain weight gradient, on fresco's narrow kernel in bf16 / f16 (the dx computed as it stages dy) and on
// cuDNN in f32 (batchnorm_backward's pass into the workspace first); the weights-only batchnorm_backward
// gives the full form's dgamma and dbeta.
TEST(CudaLowPrecision, WeightGradientPrologueGivesTheBatchnormsBits) {
  FRESCO_REQUIRE_GPU();
  ScopedEnv narrow("FRESCO_CUDA_NARROW_CONV", "1"), log("FRESCO_CUDNN_LOG", "1");
  const FrConvParams p{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
  constexpr int64_t kN = 4, kHW = 11, kC = 3, kK = 64, kRows = kN * kHW * kHW;
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_name(dt));
    SimpleTask t("cuda");
    auto map = [&](int64_t c, const char* name) {
      return t.tensor(Region::T_TEMP, dt, Shape{kN, kHW, kHW, c}, name);
    };
    auto f32 = [&](int64_t n, const char* name) {
      return t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, n}, name);
    };
    const TensorId g = map(kK, "g"), y = map(kK, "y"), x = map(kC, "x"), dx_bn = map(kK, "dx_bn");
    const TensorId w = t.tensor(Region::T_TEMP, dt, Shape{kK, 3, 3, kC}, "w");
    const TensorId dw_plain = t.tensor(Region::T_TEMP, dt, Shape{kK, 3, 3, kC}, "dw_plain");
    const TensorId dw = t.tensor(Region::T_TEMP, dt, Shape{kK, 3, 3, kC}, "dw");
    const TensorId gamma = f32(kK, "gamma"), mean = f32(kK, "mean"), invstd = f32(kK, "invstd"),
                   gsums = f32(2 * kK, "gsums");
    const TensorId dgamma[2] = {f32(kK, "dgamma"), f32(kK, "dgamma2")},
                   dbeta[2] = {f32(kK, "dbeta"), f32(kK, "dbeta2")};
    t.lock_memory();
    const FrBatchNormParams bp{1e-5f, 0.1f, 1, 0};
    GraphNode bnb =
        node(FR_OP_BATCHNORM_BACKWARD, {g, y, gamma, mean, invstd, gsums}, {dx_bn, dgamma[0], dbeta[0]});
    t.add(GraphId::DEEP_FWD_BWD, bnb.with_params(bp));
    GraphNode plain = node(FR_OP_CONV2D_BACKWARD, {dx_bn, x, w}, {dw_plain});
    t.add(GraphId::DEEP_FWD_BWD, plain.with_params(FrConvBackwardParams{p, 0, 2}));
    GraphNode fused = node(FR_OP_CONV2D_BACKWARD, {g, x, w, y, gamma, mean, invstd, gsums}, {dw});
    t.add(GraphId::DEEP_FWD_BWD, fused.with_params(FrConvBackwardParams{p, 0, 2}));
    GraphNode weights =
        node(FR_OP_BATCHNORM_BACKWARD, {g, y, gamma, mean, invstd, gsums}, {dgamma[1], dbeta[1]});
    t.add(GraphId::DEEP_FWD_BWD, weights.with_params(bp));
    testing::internal::CaptureStderr();
    t.compile();
    const std::string err = testing::internal::GetCapturedStderr();
    if (dt != DType::F32) {
      EXPECT_NE(err.find("narrow kernels for the weight gradient"), std::string::npos) << err;
    }
    std::mt19937 rng(23);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto values = [&](int64_t n, float scale, float offset) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& f : v)
        f = dt == DType::F32 ? offset + scale * u(rng) : from_low(dt, to_low(dt, offset + scale * u(rng)));
      return v;
    };
    write_values(t, g, dt, values(kRows * kK, 1.0f, 0.0f));
    write_values(t, y, dt, values(kRows * kK, 2.0f, 0.1f));
    write_values(t, x, dt, values(kRows * kC, 1.0f, 0.0f));
    write_values(t, w, dt, values(kK * 9 * kC, 0.3f, 0.0f));
    std::vector<float> gm(kK), mu(kK), is(kK), gs(2 * kK);
    for (int64_t k = 0; k < kK; ++k) {
      gm[k] = 1.0f + 0.5f * u(rng), mu[k] = 0.2f * u(rng), is[k] = 1.0f + 0.3f * u(rng);
      gs[k] = 20.0f * u(rng), gs[kK + k] = 30.0f * u(rng);
    }
    t.write(gamma, gm);
    t.write(mean, mu);
    t.write(invstd, is);
    t.write(gsums, gs);
    t.run(GraphId::DEEP_FWD_BWD);
    auto read = [&](TensorId id, int64_t n) {
      if (dt == DType::F32) return t.read<float>(id, static_cast<size_t>(n));
      const auto b = t.read<uint16_t>(id, static_cast<size_t>(n));
      std::vector<float> f(b.size());
      for (size_t j = 0; j < b.size(); ++j) f[j] = from_low(dt, b[j]);
      return f;
    };
    const std::vector<float> want = read(dw_plain, kK * 9 * kC);
    EXPECT_EQ(read(dw, kK * 9 * kC), want);
    EXPECT_GT(max_rel(want, std::vector<float>(want.size(), 0.0f)), 0.0) << "dw is all zero";
    EXPECT_EQ(t.read<float>(dgamma[1], kK), t.read<float>(dgamma[0], kK));
    EXPECT_EQ(t.read<float>(dbeta[1], kK), t.read<float>(dbeta[0], kK));
  }
}

// 3x3 convolutions of 64 -> 64 channels on 32-wide maps run on fresco's own warpgroup-MMA kernels on
// compute capability 9.0 (ops/conv3x3_wgmma.h): the forward with the sums output and both gradients of a
// whole backward, against the f32 convolution on the same values; the
// sums against the sums of y as stored. On other devices cuDNN runs them and the same checks hold.
TEST(CudaLowPrecision, Hopper3x3Convolutions) {
  FRESCO_REQUIRE_GPU();
  ScopedEnv log("FRESCO_CUDNN_LOG", "1");
  const FrConvParams p{3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
  const Shape xs{3, 8, 32, 64}, ws{64, 3, 3, 64}, ss{1, 1, 1, 128};
  LowCase f{
      {{xs, Fill::RANDOM, true}, {ws, Fill::RANDOM, true}, {xs, Fill::ZERO, true}, {ss, Fill::RANDOM, false}},
      node(FR_OP_CONV2D, {0, 1}, {2, 3}),
      {2, 3}};
  f.node.with_params(p);
  const LowCase b = conv_backward_case(xs, ws, xs, p);
  for (DType low : {DType::BF16, DType::F16}) {
    const double tol = low == DType::BF16 ? 1.6e-2 : 2e-3;
    const auto v = values_of(f, low, 19);
    const auto ref = run_low(f, DType::F32, v);
    testing::internal::CaptureStderr();
    const auto got = run_low(f, low, v);
    const std::string err = testing::internal::GetCapturedStderr();
    const bool own = err.find("wgmma kernels for the forward with sums") != std::string::npos;
    const char* path = own ? "fresco's kernels" : "cuDNN (not a compute capability 9.0 device)";
    std::printf("[          ] %s %s\n", dtype_name(low), path);
    SCOPED_TRACE(path);
    EXPECT_LE(max_rel(got[0], ref[0]), tol) << dtype_name(low) << " y";
    expect_sums_of_stored(got[0], got[1], 64, 1e-6, dtype_name(low));
    const auto vb = values_of(b, low, 23);
    const auto ref_b = run_low(b, DType::F32, vb);
    testing::internal::CaptureStderr();
    const auto got_b = run_low(b, low, vb);
    const std::string err_b = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err_b.find("wgmma kernels for the input gradient weight gradient") != std::string::npos, own)
        << err_b;
    EXPECT_LE(max_rel(got_b[0], ref_b[0]), tol) << dtype_name(low) << " dw";
    EXPECT_LE(max_rel(got_b[1], ref_b[1]), tol) << dtype_name(low) << " dx";
    EXPECT_GT(max_rel(ref_b[1], std::vector<float>(ref_b[1].size(), 0.0f)), 0.0) << "dx is all zero";
  }
}
