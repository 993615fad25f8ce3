// The compact gradient part of a strided 1x1 conv on CUDA (ops.h, FR_KERNEL_COMPACT_GRAD): add_relu_backward
// with a compact b writes the bits of the full-size part (b at the strided positions, +0 elsewhere), with and
// without gradient sums, on the vector and the scalar kernels; conv2d_backward's compact input gradient holds
// the full-size one's values at those positions; a strided 1x1 conv's weight gradient (which reads x at those
// positions) against a host reference; batchnorm_add's subsampled output. f32, bf16 and f16. Skipped without
// a GPU.
#include <cmath>
#include <random>
#include <utility>

#include "plugins/cuda/gpu_fixture.h"
#include "plugins/cuda/low_precision_case.h"

using namespace fresco;
using namespace fresco::gpu_test;

TEST(CudaCompactGrad, AddReluBackwardGivesTheFullSizePartsBits) {
  FRESCO_REQUIRE_GPU();
  for (int64_t ch : {64, 7})
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(ch));
      const int64_t nn = 6, h = 9, w = 10, p = 5, q = 5;  // stride 2: rows 0, 2, .., 8 and columns 0, .., 8
      const Shape x{nn, h, w, ch}, xc{nn, p, q, ch}, v{1, 1, 1, ch}, s2{1, 1, 1, 2 * ch};
      SimpleTask t("cuda");
      auto map = [&](const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); };
      const TensorId a = map("a"), bf = map("b full"), y = map("y"), xi = map("x"), g1 = map("g1"),
                     g2 = map("g2"), g3 = map("g3"), g4 = map("g4");
      const TensorId bc = t.tensor(Region::T_TEMP, dt, xc, "b compact");
      const TensorId mean = t.tensor(Region::T_TEMP, DType::F32, v, "mean");
      const TensorId gs3 = t.tensor(Region::T_TEMP, DType::F32, s2, "gsums full"),
                     gs4 = t.tensor(Region::T_TEMP, DType::F32, s2, "gsums compact");
      t.lock_memory();
      const FrAddReluBackwardParams strides{2, 2};
      t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_ADD_RELU_BACKWARD, {a, bf, y}, {g1}));
      t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_ADD_RELU_BACKWARD, {a, bc, y}, {g2}).with_params(strides));
      t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_ADD_RELU_BACKWARD, {a, bf, y, xi, mean}, {g3, gs3}));
      t.add(GraphId::DEEP_FWD_BWD,
            node(FR_OP_ADD_RELU_BACKWARD, {a, bc, y, xi, mean}, {g4, gs4}).with_params(strides));
      t.compile();
      std::mt19937 rng(23);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      const size_t n = static_cast<size_t>(x.numel()), c = static_cast<size_t>(ch);
      std::vector<float> av(n), yv(n), xv(n), full(n, 0.0f), compact(static_cast<size_t>(xc.numel()));
      for (size_t i = 0; i < n; ++i) av[i] = d(rng), yv[i] = d(rng), xv[i] = 1.0f + 2.0f * d(rng);
      for (size_t i = 0; i < n; i += 5) av[i] = -0.0f, yv[i] = 0.5f;  // a -0 where the relu passes it
      for (float& e : compact) e = d(rng);
      for (int64_t i = 0; i < nn; ++i)
        for (int64_t r = 0; r < p; ++r)
          for (int64_t s = 0; s < q; ++s)
            for (size_t k = 0; k < c; ++k)
              full[static_cast<size_t>(((i * h + 2 * r) * w + 2 * s) * ch) + k] =
                  compact[static_cast<size_t>(((i * p + r) * q + s) * ch) + k];
      write_values(t, a, dt, av);
      write_values(t, y, dt, yv);
      write_values(t, xi, dt, xv);
      write_values(t, bf, dt, full);
      write_values(t, bc, dt, compact);
      std::vector<float> mv(c);
      for (float& e : mv) e = 1.0f + 0.2f * d(rng);
      t.write(mean, mv);
      t.run(GraphId::DEEP_FWD_BWD);
      const size_t bytes = n * dtype_size(dt);
      auto read = [&](TensorId id) {
        std::vector<uint8_t> r(bytes);
        t.read(id, r.data(), bytes);
        return r;
      };
      const std::vector<uint8_t> want = read(g1);
      EXPECT_EQ(read(g2), want) << "the masked gradient";
      EXPECT_EQ(read(g3), want) << "the masked gradient (full-size part, with sums)";
      EXPECT_EQ(read(g4), want) << "the masked gradient (compact part, with sums)";
      EXPECT_EQ(t.read<float>(gs4, 2 * c), t.read<float>(gs3, 2 * c)) << "the gradient sums";
    }
}

// A strided 1x1 conv's compact input gradient against its full-size one: the same values at the strided
// positions (cuDNN plans the compact one as the 1x1 conv at stride 1; its sums over the 32 output channels
// may run in another order: within a rounding of the dtype).
TEST(CudaCompactGrad, ConvInputGradientAtTheStridedPositions) {
  FRESCO_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t nn = 4, h = 9, w = 10, p = 5, q = 5, ci = 16, co = 32;
    SimpleTask t("cuda");
    const TensorId dy = t.tensor(Region::T_TEMP, dt, Shape{nn, p, q, co}, "dy");
    const TensorId x = t.tensor(Region::T_TEMP, dt, Shape{nn, h, w, ci}, "x");
    const TensorId wt = t.tensor(Region::T_TEMP, dt, Shape{co, 1, 1, ci}, "w");
    const TensorId full = t.tensor(Region::T_TEMP, dt, Shape{nn, h, w, ci}, "dx full");
    const TensorId compact = t.tensor(Region::T_TEMP, dt, Shape{nn, p, q, ci}, "dx compact");
    t.lock_memory();
    const FrConvBackwardParams bp{FrConvParams{1, 1, 2, 2, 0, 0, 1, 1, 1, 0}, 1, 1};
    t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_CONV2D_BACKWARD, {dy, x, wt}, {full}).with_params(bp));
    t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_CONV2D_BACKWARD, {dy, x, wt}, {compact}).with_params(bp));
    t.compile();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (const auto& [id, count] :
         {std::pair{dy, nn * p * q * co}, std::pair{x, nn * h * w * ci}, std::pair{wt, co * ci}}) {
      std::vector<float> f(static_cast<size_t>(count));
      for (float& e : f) e = d(rng);
      write_values(t, id, dt, f);
    }
    t.run(GraphId::DEEP_FWD_BWD);
    const std::vector<float> fv = read_values(t, full, dt, static_cast<size_t>(nn * h * w * ci)),
                             cv = read_values(t, compact, dt, static_cast<size_t>(nn * p * q * ci));
    const double tol = dt == DType::F32 ? 1e-5 : dt == DType::BF16 ? 2e-2 : 3e-3;
    double worst = 0.0, zeros = 0.0;
    for (int64_t i = 0; i < nn; ++i)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t s = 0; s < w; ++s)
          for (int64_t k = 0; k < ci; ++k) {
            const float f = fv[static_cast<size_t>(((i * h + r) * w + s) * ci + k)];
            if (r % 2 || s % 2) {
              zeros = std::max(zeros, static_cast<double>(std::fabs(f)));
              continue;
            }
            const float c = cv[static_cast<size_t>(((i * p + r / 2) * q + s / 2) * ci + k)];
            worst = std::max(worst, std::fabs(static_cast<double>(c) - f) / (1.0 + std::fabs(f)));
          }
    EXPECT_LE(worst, tol);
    EXPECT_EQ(zeros, 0.0) << "the full-size gradient's other positions";
  }
}

// The weight gradient of a strided 1x1 conv on a cuDNN engine over a strided view of x (the positions it
// reads; conv_plan.cpp, Context::strided_view_wgrad) against a host reference from the same rounded values:
// within the dtype's rounding of the largest gradient. The shape is large enough for the engines (2^29
// flops).
TEST(CudaCompactGrad, StridedOneByOneWeightGradient) {
  FRESCO_REQUIRE_GPU();
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t nn = 128, h = 32, w = 32, p = 16, q = 16, ci = 64, co = 128;
    SimpleTask t("cuda");
    const TensorId dy = t.tensor(Region::T_TEMP, dt, Shape{nn, p, q, co}, "dy");
    const TensorId x = t.tensor(Region::T_TEMP, dt, Shape{nn, h, w, ci}, "x");
    const TensorId wt = t.tensor(Region::T_TEMP, dt, Shape{co, 1, 1, ci}, "w");
    const TensorId dw = t.tensor(Region::T_TEMP, dt, Shape{co, 1, 1, ci}, "dw");
    t.lock_memory();
    const FrConvBackwardParams bp{FrConvParams{1, 1, 2, 2, 0, 0, 1, 1, 1, 0}, 0, 2};
    t.add(GraphId::DEEP_FWD_BWD, node(FR_OP_CONV2D_BACKWARD, {dy, x, wt}, {dw}).with_params(bp));
    t.compile();
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> dyv(static_cast<size_t>(nn * p * q * co)), xv(static_cast<size_t>(nn * h * w * ci));
    for (float& e : dyv) e = from_low(dt, to_low(dt, d(rng)));
    for (float& e : xv) e = from_low(dt, to_low(dt, d(rng)));
    write_values(t, dy, dt, dyv);
    write_values(t, x, dt, xv);
    write_values(t, wt, dt, std::vector<float>(static_cast<size_t>(co * ci), 0.5f));
    t.run(GraphId::DEEP_FWD_BWD);
    const std::vector<float> got = read_values(t, dw, dt, static_cast<size_t>(co * ci));
    std::vector<double> want(static_cast<size_t>(co * ci), 0.0);
    for (int64_t i = 0; i < nn; ++i)
      for (int64_t r = 0; r < p; ++r)
        for (int64_t s = 0; s < q; ++s) {
          const float* g = &dyv[static_cast<size_t>(((i * p + r) * q + s) * co)];
          const float* xr = &xv[static_cast<size_t>(((i * h + 2 * r) * w + 2 * s) * ci)];
          for (int64_t k = 0; k < co; ++k)
            for (int64_t c = 0; c < ci; ++c) want[static_cast<size_t>(k * ci + c)] += double(g[k]) * xr[c];
        }
    double top = 0.0, worst = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      top = std::max(top, std::fabs(want[i]));
      worst = std::max(worst, std::fabs(got[i] - want[i]));
    }
    EXPECT_LE(worst / top, dt == DType::BF16 ? 1e-2 : 2e-3) << "largest |dw| " << top;
    EXPECT_GT(top, 10.0);  // a real sum over the 32768 positions
  }
}

// batchnorm_add's subsampled output (ops.h): y's even rows and columns, bit for bit, beside the same y as
// without it, on the vector kernel (C = 64) and the scalar one (C = 7), odd sides (9 x 11).
TEST(CudaCompactGrad, BatchnormAddWritesItsEvenRowsAndColumns) {
  FRESCO_REQUIRE_GPU();
  for (int64_t ch : {64, 7})
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " C=" + std::to_string(ch));
      const int64_t nn = 4, h = 9, w = 11, p = 5, q = 6;
      const Shape x{nn, h, w, ch}, v{1, 1, 1, ch};
      SimpleTask t("cuda");
      auto map = [&](const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); };
      auto vec = [&](const char* name) { return t.tensor(Region::T_TEMP, DType::F32, v, name); };
      const TensorId xi = map("x"), r = map("r"), y1 = map("y plain"), y2 = map("y");
      const TensorId sub = t.tensor(Region::T_TEMP, dt, Shape{nn, p, q, ch}, "y2");
      const TensorId g = vec("gamma"), b = vec("beta"), m1 = vec("m1"), i1 = vec("i1"), m2 = vec("m2"),
                     i2 = vec("i2"), rm1 = vec("rm1"), rv1 = vec("rv1"), rm2 = vec("rm2"), rv2 = vec("rv2");
      t.lock_memory();
      auto bn_add = [&](TensorId y, TensorId mean, TensorId invstd, TensorId rm, TensorId rv, bool with_sub) {
        GraphNode n = node(FR_OP_BATCHNORM_ADD, {xi, g, b, r}, {y, mean, invstd});
        if (with_sub) n.out.push_back(sub);
        n.rout = {RangeRef::of(rm, DType::F32), RangeRef::of(rv, DType::F32)};
        n.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
        t.add(GraphId::DEEP_FWD_BWD, n);
      };
      bn_add(y1, m1, i1, rm1, rv1, false);
      bn_add(y2, m2, i2, rm2, rv2, true);
      t.compile();
      std::mt19937 rng(31);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      const size_t n = static_cast<size_t>(x.numel()), c = static_cast<size_t>(ch);
      std::vector<float> xv(n), rv(n), gv(c), bv(c);
      for (size_t i = 0; i < n; ++i) xv[i] = 2.0f * d(rng), rv[i] = d(rng);
      for (size_t i = 0; i < c; ++i) gv[i] = 1.0f + 0.5f * d(rng), bv[i] = 0.2f * d(rng);
      write_values(t, xi, dt, xv);
      write_values(t, r, dt, rv);
      t.write(g, gv);
      t.write(b, bv);
      for (const TensorId id : {rm1, rm2}) t.write(id, std::vector<float>(c, 0.0f));
      for (const TensorId id : {rv1, rv2}) t.write(id, std::vector<float>(c, 1.0f));
      t.run(GraphId::DEEP_FWD_BWD);
      const std::vector<float> plain = read_values(t, y1, dt, n), with = read_values(t, y2, dt, n),
                               half = read_values(t, sub, dt, static_cast<size_t>(nn * p * q * ch));
      EXPECT_EQ(with, plain) << "y";
      size_t wrong = 0;
      for (int64_t i = 0; i < nn; ++i)
        for (int64_t a = 0; a < p; ++a)
          for (int64_t e = 0; e < q; ++e)
            for (size_t k = 0; k < c; ++k)
              wrong += half[static_cast<size_t>(((i * p + a) * q + e) * ch) + k] !=
                       plain[static_cast<size_t>(((i * h + 2 * a) * w + 2 * e) * ch) + k];
      EXPECT_EQ(wrong, 0u) << "the even rows and columns";
    }
}
