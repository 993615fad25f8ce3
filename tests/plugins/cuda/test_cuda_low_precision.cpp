// The CUDA kernels in f16 and bf16 against the same kernels in f32 (which test_cuda_ops.cpp checks against
// the CPU): every low-precision input is first rounded to the low dtype, the f32 run gets exactly those
// values, and the outputs agree within the low dtype's rounding (plus accumulation). The casts are checked
// bit for bit against host rounding. Skipped without a GPU.

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

// 999 values take the one-per-thread kernel, 2048 the four-per-thread one.
TEST(CudaLowPrecision, CastsRoundLikeTheHost) {
  FRESCO_REQUIRE_GPU();
  for (const Shape& s : {Shape{3, 1, 1, 333}, Shape{2, 1, 1, 1024}})
    for (DType low : {DType::BF16, DType::F16}) {
      std::vector<float> x(static_cast<size_t>(s.numel()));
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> d(-70.0f, 70.0f);
      for (float& f : x) f = d(rng);
      // compute cast f32 -> low, then a range cast low -> f32 over the same tensor
      SimpleTask t("cuda");
      const TensorId a = t.tensor(Region::T_TEMP, DType::F32, s, "a");
      const TensorId b = t.tensor(Region::T_TEMP, low, s, "b");
      const TensorId c = t.tensor(Region::T_TEMP, DType::F32, s, "c");
      t.lock_memory();
      t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_CAST, {a}, {b}));
      t.add(GraphId::DEEP_FWD_BWD,
            range_node(FR_OP_CAST_RANGE, {RangeRef::of(b, low)}, {RangeRef::of(c, DType::F32)}));
      t.compile();
      t.write(a, x);
      t.run(GraphId::DEEP_FWD_BWD);
      const auto bits = t.read<uint16_t>(b, x.size());
      const auto back = t.read<float>(c, x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(bits[i], to_low(low, x[i])) << dtype_name(low) << " cast of " << x[i];
        ASSERT_EQ(back[i], from_low(low, bits[i])) << dtype_name(low) << " range cast back";
      }
    }
}

// unscale_grads with a 16-bit source (fp16's gradient cast): g = float(src) * (1 / loss_scale) bit for bit as
// the host computes it, in both the four-per-thread and the one-per-thread kernel; an inf sets skip_step.
TEST(CudaLowPrecision, UnscaleCastsTheLowPrecisionGradients) {
  FRESCO_REQUIRE_GPU();
  for (int64_t n : {999, 2048})
    for (DType low : {DType::F16, DType::BF16})
      for (bool with_inf : {false, true}) {
        std::vector<uint16_t> src(static_cast<size_t>(n));
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> d(-3000.0f, 3000.0f);
        for (auto& h : src) h = to_low(low, d(rng));
        if (with_inf) src[static_cast<size_t>(n / 2)] = low == DType::F16 ? 0x7c00u : 0x7f80u;
        SimpleTask t("cuda");
        const TensorId a = t.tensor(Region::T_TEMP, low, Shape{1, 1, 1, n}, "g16");
        const TensorId g = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, n}, "g");
        const TensorId sc =
            t.tensor(Region::T_TEMP, DType::U8, Shape{1, 1, 1, sizeof(FrStepScalars)}, "scalars");
        t.lock_memory();
        t.add(GraphId::DEEP_FWD_BWD, range_node(FR_OP_UNSCALE_GRADS, {RangeRef::of(a, low)},
                                                {RangeRef::of(g, DType::F32), RangeRef::of(sc, DType::U8)}));
        t.compile();
        FrStepScalars s{};
        s.loss_scale = 1024.0f;
        t.write(sc, &s, sizeof s);
        t.write(a, src.data(), src.size() * 2);
        t.run(GraphId::DEEP_FWD_BWD);
        const auto out = t.read<float>(g, src.size());
        t.read(sc, &s, sizeof s);
        const float inv = 1.0f / 1024.0f;
        for (size_t i = 0; i < src.size(); ++i)
          ASSERT_EQ(out[i], from_low(low, src[i]) * inv) << dtype_name(low) << " n " << n << " at " << i;
        EXPECT_EQ(s.skip_step, with_inf ? 1 : 0) << dtype_name(low) << " n " << n;
      }
}

TEST(CudaLowPrecision, PointwiseAndPools) {
  FRESCO_REQUIRE_GPU();
  const Shape x{4, 6, 6, 40}, pooled{4, 3, 3, 40}, g{4, 1, 1, 40};
  LowCase relu{{{x, Fill::RANDOM, true}, {x, Fill::ZERO, true}}, node(FR_OP_RELU, {0}, {1}), {1}};
  expect_close_to_f32(relu, 0.0, 0.0, "relu");
  LowCase relu_b{{{x, Fill::RANDOM, true}, {x, Fill::RANDOM, true}, {x, Fill::ZERO, true}},
                 node(FR_OP_RELU_BACKWARD, {0, 1}, {2}),
                 {2}};
  expect_close_to_f32(relu_b, 0.0, 0.0, "relu_backward");
  LowCase add{{{x, Fill::RANDOM, true}, {x, Fill::RANDOM, true}, {x, Fill::ZERO, true}},
              node(FR_OP_ADD, {0, 1}, {2}),
              {2}};
  expect_close_to_f32(add, 4e-3, 5e-4, "add");
  LowCase gap{{{x, Fill::RANDOM, true}, {g, Fill::ZERO, true}}, node(FR_OP_GLOBAL_AVG_POOL, {0}, {1}), {1}};
  expect_close_to_f32(gap, 8e-3, 1e-3, "global_avg_pool");
  LowCase gap_b{
      {{g, Fill::RANDOM, true}, {x, Fill::ZERO, true}}, node(FR_OP_GLOBAL_AVG_POOL_BACKWARD, {0}, {1}), {1}};
  expect_close_to_f32(gap_b, 4e-3, 5e-4, "global_avg_pool_backward");
  // channels in whole 16-byte vectors that divide 256 threads: the vector kernel (8 and 256 vectors a row)
  for (const int64_t c : {int64_t{64}, int64_t{2048}}) {
    LowCase gap_bv{{{Shape{3, 1, 1, c}, Fill::RANDOM, true}, {Shape{3, 5, 5, c}, Fill::ZERO, true}},
                   node(FR_OP_GLOBAL_AVG_POOL_BACKWARD, {0}, {1}),
                   {1}};
    expect_close_to_f32(gap_bv, 4e-3, 5e-4, "global_avg_pool_backward c " + std::to_string(c));
  }
  LowCase mp{{{x, Fill::RANDOM, true}, {pooled, Fill::ZERO, true}}, node(FR_OP_MAX_POOL2D, {0}, {1}), {1}};
  mp.node.with_params(FrPoolParams{2, 2, 2, 2, 0, 0});
  expect_close_to_f32(mp, 0.0, 0.0, "max_pool2d");
  LowCase ap{{{x, Fill::RANDOM, true}, {pooled, Fill::ZERO, true}}, node(FR_OP_AVG_POOL2D, {0}, {1}), {1}};
  ap.node.with_params(FrPoolParams{2, 2, 2, 2, 0, 0});
  expect_close_to_f32(ap, 8e-3, 1e-3, "avg_pool2d");
  const Shape img{4, 6, 6, 3};
  LowCase norm{
      {{img, Fill::BYTES, false}, {img, Fill::ZERO, true}}, node(FR_OP_NORMALIZE_INPUT, {0}, {1}), {1}};
  FrNormalizeParams np{};
  np.channels = 3;
  for (int c = 0; c < 3; ++c) np.mean[c] = 0.5f, np.std[c] = 0.25f;
  norm.node.with_params(np);
  expect_close_to_f32(norm, 4e-3, 5e-4, "normalize_input");
}

TEST(CudaLowPrecision, BatchNormKeepsF32Statistics) {
  FRESCO_REQUIRE_GPU();
  const Shape x{8, 5, 5, 48}, v{1, 1, 1, 48};
  LowCase f{{{x, Fill::RANDOM, true},
             {v, Fill::RANDOM, false},
             {v, Fill::RANDOM, false},
             {x, Fill::ZERO, true},
             {v, Fill::ZERO, false},
             {v, Fill::ZERO, false},
             {v, Fill::RANDOM, false},
             {v, Fill::POSITIVE, false}},
            node(FR_OP_BATCHNORM, {0, 1, 2}, {3, 4, 5}),
            {3, 4, 5, 6, 7}};
  f.node.rout = {RangeRef::of(6, DType::F32), RangeRef::of(7, DType::F32)};
  f.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  // statistics come from the same (rounded) inputs: only y is rounded
  expect_close_to_f32(f, 1.6e-2, 2e-3, "batchnorm");
  LowCase add = f;  // batchnorm_add: + a low-precision residual, then relu
  add.tensors.push_back({x, Fill::RANDOM, true});
  add.node.op = FR_OP_BATCHNORM_ADD;
  add.node.in.push_back(8);
  add.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  expect_close_to_f32(add, 1.6e-2, 2e-3, "batchnorm_add");
  LowCase b{{{x, Fill::RANDOM, true},
             {x, Fill::RANDOM, true},
             {v, Fill::RANDOM, false},
             {v, Fill::RANDOM, false},
             {v, Fill::POSITIVE, false},
             {x, Fill::ZERO, true},
             {v, Fill::ZERO, false},
             {v, Fill::ZERO, false}},
            node(FR_OP_BATCHNORM_BACKWARD, {0, 1, 2, 3, 4}, {5, 6, 7}),
            {5, 6, 7}};
  expect_close_to_f32(b, 1.6e-2, 2e-3, "batchnorm_backward");
  LowCase a{
      {{x, Fill::RANDOM, true}, {v, Fill::RANDOM, false}, {v, Fill::RANDOM, false}, {x, Fill::ZERO, true}},
      node(FR_OP_CHANNEL_AFFINE, {0, 1, 2}, {3}),
      {3}};  // the folded inference form's apply pass on a low-precision map
  a.node.with_params(FrChannelAffineParams{1, 0});
  expect_close_to_f32(a, 1.6e-2, 2e-3, "channel_affine");
}

// batchnorm_backward with a fused relu recomputes the relu's mask from x when given beta (ops.h): the same
// dx, dgamma and dbeta bit for bit as reading the mask from the forward's y, in f32, bf16 and f16 (where
// some positive values round to zero). The forward and both backwards run in one graph.
TEST(CudaLowPrecision, BatchNormBackwardRecomputesTheReluMaskExactly) {
  FRESCO_REQUIRE_GPU();
  const Shape x{16, 6, 6, 64}, v{1, 1, 1, 64};
  const size_t n = static_cast<size_t>(x.numel()), c = 64;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SimpleTask t("cuda");
    auto map = [&](const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); };
    auto vec = [&](const char* name) { return t.tensor(Region::T_TEMP, DType::F32, v, name); };
    const TensorId xi = map("x"), y = map("y"), dy = map("dy"), dx6 = map("dx6"), dx7 = map("dx7");
    const TensorId gamma = vec("gamma"), beta = vec("beta"), mean = vec("mean"), invstd = vec("invstd");
    const TensorId rm = vec("rm"), rv = vec("rv"), dg6 = vec("dg6"), db6 = vec("db6"), dg7 = vec("dg7"),
                   db7 = vec("db7");
    t.lock_memory();
    GraphNode f = node(FR_OP_BATCHNORM, {xi, gamma, beta}, {y, mean, invstd});
    f.rout = {RangeRef::of(rm, DType::F32), RangeRef::of(rv, DType::F32)};
    f.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
    t.add(GraphId::DEEP_FWD_BWD, f);
    GraphNode read = node(FR_OP_BATCHNORM_BACKWARD, {dy, xi, gamma, mean, invstd, y}, {dx6, dg6, db6});
    read.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
    t.add(GraphId::DEEP_FWD_BWD, read);
    GraphNode recompute = read;
    recompute.in.push_back(beta);
    recompute.out = {dx7, dg7, db7};
    t.add(GraphId::DEEP_FWD_BWD, recompute);
    t.compile();
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    auto write_map = [&](TensorId id, float scale) {
      std::vector<float> f32(n);
      for (float& e : f32) e = scale * d(rng);
      write_values(t, id, dt, f32);
    };
    write_map(xi, 3.0f);
    write_map(dy, 1.0f);
    std::vector<float> g(c), b(c), ones(c, 1.0f), zeros(c, 0.0f);
    for (size_t i = 0; i < c; ++i) g[i] = 0.5f + std::fabs(d(rng)), b[i] = 0.3f * d(rng);
    t.write(gamma, g);
    t.write(beta, b);
    t.write(rm, zeros);
    t.write(rv, ones);
    t.run(GraphId::DEEP_FWD_BWD);
    const size_t bytes = n * dtype_size(dt);
    std::vector<uint8_t> a6(bytes), a7(bytes), ys(bytes);
    t.read(dx6, a6.data(), bytes);
    t.read(dx7, a7.data(), bytes);
    t.read(y, ys.data(), bytes);
    EXPECT_EQ(a6, a7) << dtype_name(dt) << ": dx";
    EXPECT_EQ(t.read<float>(dg6, c), t.read<float>(dg7, c)) << dtype_name(dt) << ": dgamma";
    EXPECT_EQ(t.read<float>(db6, c), t.read<float>(db7, c)) << dtype_name(dt) << ": dbeta";
    size_t zero = 0;
    const size_t w = dtype_size(dt);
    for (size_t i = 0; i < n; ++i) {
      bool z = true;
      for (size_t k = 0; k < w; ++k) z = z && ys[i * w + k] == 0;
      zero += z;
    }
    EXPECT_GT(zero, n / 4) << dtype_name(dt) << ": the relu cuts";
  }
}

// The masking passes that hand batchnorm its gradient sums (ops.h, "Gradient sums";
// CompileOptions::grad_sums): add_relu_backward / relu_backward with x and save_mean write the same dx bits
// as without them, and batchnorm_backward given those sums computes what it computes from its own pass, up to
// the f32 rounding of the handed-over totals (dgamma, dbeta within 1e-6; dx within one rounding of its dtype,
// 2e-5 in f32, where x - mean cancels), in f32, bf16 and f16, on the vector kernels (C = 64) and the scalar
// ones (C = 7). All nodes run in one graph.
TEST(CudaLowPrecision, MaskingPassesHandBatchnormItsGradientSums) {
  FRESCO_REQUIRE_GPU();
  for (int64_t ch : {64, 7})
    for (DType dt : {DType::F32, DType::BF16, DType::F16})
      for (bool two : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(ch) +
                     (two ? " add_relu" : " relu"));
        const Shape x{48, 6, 6, ch}, v{1, 1, 1, ch};  // 27 chunks of rows (channel_sums.cuh)
        const size_t n = static_cast<size_t>(x.numel()), c = static_cast<size_t>(ch);
        SimpleTask t("cuda");
        auto map = [&](const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); };
        auto vec = [&](const char* name) { return t.tensor(Region::T_TEMP, DType::F32, v, name); };
        const TensorId a = map("a"), b = map("b"), y = map("y"), xi = map("x"), g1 = map("g1"),
                       g2 = map("g2"), dx1 = map("dx1"), dx2 = map("dx2");
        const TensorId gamma = vec("gamma"), mean = vec("mean"), invstd = vec("invstd"), dg1 = vec("dg1"),
                       db1 = vec("db1"), dg2 = vec("dg2"), db2 = vec("db2");
        const TensorId gs = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 2 * ch}, "gsums");
        const TensorId x2 = map("x2"), g3 = map("g3"), g4 = map("g4");  // two (x, save_mean) pairs
        const TensorId gsa = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 2 * ch}, "gsums a"),
                       gsb = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 2 * ch}, "gsums b"),
                       gsc = t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, 2 * ch}, "gsums c");
        t.lock_memory();
        const char* op = two ? FR_OP_ADD_RELU_BACKWARD : FR_OP_RELU_BACKWARD;
        const std::vector<TensorId> parts =
            two ? std::vector<TensorId>{a, b, y} : std::vector<TensorId>{a, y};
        t.add(GraphId::DEEP_FWD_BWD, node(op, parts, {g1}));
        GraphNode own = node(FR_OP_BATCHNORM_BACKWARD, {g1, xi, gamma, mean, invstd}, {dx1, dg1, db1});
        own.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
        t.add(GraphId::DEEP_FWD_BWD, own);
        std::vector<TensorId> with = parts;
        with.insert(with.end(), {xi, mean});
        t.add(GraphId::DEEP_FWD_BWD, node(op, with, {g2, gs}));
        GraphNode given = node(FR_OP_BATCHNORM_BACKWARD, {g2, xi, gamma, mean, invstd, gs}, {dx2, dg2, db2});
        given.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
        t.add(GraphId::DEEP_FWD_BWD, given);
        std::vector<TensorId> pair2 = with, single2 = parts;
        pair2.insert(pair2.end(), {x2, mean});
        single2.insert(single2.end(), {x2, mean});
        t.add(GraphId::DEEP_FWD_BWD, node(op, pair2, {g3, gsa, gsb}));
        t.add(GraphId::DEEP_FWD_BWD, node(op, single2, {g4, gsc}));
        t.compile();
        std::mt19937 rng(17);
        std::uniform_real_distribution<float> d(-1.0f, 1.0f);
        auto write_map = [&](TensorId id, float scale, float shift) {
          std::vector<float> f(n);
          for (float& e : f) e = shift + scale * d(rng);
          write_values(t, id, dt, f);
        };
        write_map(a, 1.0f, 0.0f);
        write_map(b, 1.0f, 0.0f);
        write_map(y, 1.0f, 0.0f);
        write_map(xi, 2.0f, 1.0f);
        write_map(x2, 1.0f, 1.0f);
        std::vector<float> gv(c), mv(c), iv(c);
        for (size_t i = 0; i < c; ++i)
          gv[i] = 0.5f + std::fabs(d(rng)), mv[i] = 1.0f + 0.2f * d(rng), iv[i] = 0.5f + std::fabs(d(rng));
        t.write(gamma, gv);
        t.write(mean, mv);
        t.write(invstd, iv);
        t.run(GraphId::DEEP_FWD_BWD);
        const size_t w = dtype_size(dt), bytes = n * w;
        std::vector<uint8_t> r1(bytes), r2(bytes);
        t.read(g1, r1.data(), bytes);
        t.read(g2, r2.data(), bytes);
        EXPECT_EQ(r1, r2) << "the masked gradient";
        std::vector<uint8_t> r3(bytes);
        t.read(g3, r3.data(), bytes);
        EXPECT_EQ(r3, r2) << "the masked gradient (two pairs)";
        EXPECT_EQ(t.read<float>(gsa, 2 * c), t.read<float>(gs, 2 * c)) << "two pairs: the first x's sums";
        EXPECT_EQ(t.read<float>(gsb, 2 * c), t.read<float>(gsc, 2 * c)) << "two pairs: the second x's sums";
        size_t zero = 0;
        for (size_t i = 0; i < n; ++i) {
          bool z = true;
          for (size_t k = 0; k < w; ++k) z = z && r2[i * w + k] == 0;
          zero += z;
        }
        EXPECT_GT(zero, n / 4) << "the mask cuts";
        auto floats = [&](TensorId id) {
          std::vector<float> f(n);
          if (dt == DType::F32) return t.read<float>(id, n);
          std::vector<uint16_t> u(n);
          t.read(id, u.data(), bytes);
          for (size_t i = 0; i < n; ++i) f[i] = from_low(dt, u[i]);
          return f;
        };
        const std::vector<float> f1 = floats(dx1), f2 = floats(dx2);
        const double ulp = dt == DType::F32 ? 2e-5 : dt == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
        double worst = 0.0;
        for (size_t i = 0; i < n; ++i)
          worst = std::max(worst, std::fabs(f1[i] - f2[i]) / (1e-3 + std::fabs(f1[i])));
        EXPECT_LE(worst, ulp) << "dx";
        const std::vector<float> eg1 = t.read<float>(dg1, c), eg2 = t.read<float>(dg2, c),
                                 eb1 = t.read<float>(db1, c), eb2 = t.read<float>(db2, c);
        for (size_t i = 0; i < c; ++i) {
          EXPECT_NEAR(eg2[i], eg1[i], 1e-6 * (1.0 + std::fabs(eg1[i]))) << "dgamma " << i;
          EXPECT_NEAR(eb2[i], eb1[i], 1e-6 * (1.0 + std::fabs(eb1[i]))) << "dbeta " << i;
        }
        // A second run from zeroed outputs writes the same bits (the sums are deterministic).
        const std::vector<TensorId> sums_out{gs, gsa, gsb, gsc, dg1, db1};
        std::vector<std::vector<float>> first;
        for (TensorId id : sums_out) {
          const size_t m = id == dg1 || id == db1 ? c : 2 * c;
          first.push_back(t.read<float>(id, m));
          t.write(id, std::vector<float>(m, 0.0f));
        }
        t.run(GraphId::DEEP_FWD_BWD);
        for (size_t i = 0; i < sums_out.size(); ++i)
          EXPECT_EQ(t.read<float>(sums_out[i], first[i].size()), first[i]) << "second run, output " << i;
      }
}
