// Every CUDA kernel against the CPU kernel on random data (forward, backward and range ops), run through the
// same SimpleTask path (memory plan, capture as a CUDA Graph, replay). Skipped without a GPU.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;
using namespace fresco::gpu_test;

namespace {
RangeRef f32(TensorId id) {
  return RangeRef::of(id, DType::F32);
}
RangeRef bytes(TensorId id) {
  return RangeRef::of(id, DType::U8);
}

void expect_same(const OpCase& c, double tol, const std::string& what) {
  for (uint32_t seed : {1u, 2u}) {
    const auto cpu = run_case("cpu", c, seed);
    const auto gpu = run_case("cuda", c, seed);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      const double d = rel_diff(gpu[i], cpu[i]);
      EXPECT_LE(d, tol) << what << ": output " << i << " differs by " << d << " (seed " << seed << ")";
    }
  }
}
const Shape kX{37, 1, 1, 53};
}  // namespace

TEST(CudaOps, FcForward) {
  FRESCO_REQUIRE_GPU();
  for (bool bias : {true, false})
    for (int relu : {0, 1}) {
      OpCase c;
      c.tensors = {{DType::F32, kX, Fill::RANDOM},
                   {DType::F32, {29, 1, 1, 53}, Fill::RANDOM},
                   {DType::F32, {1, 1, 1, 29}, Fill::RANDOM},
                   {DType::F32, {37, 1, 1, 29}, Fill::ZERO}};
      c.node = node(FR_OP_FC, bias ? std::vector<TensorId>{0, 1, 2} : std::vector<TensorId>{0, 1}, {3});
      c.node.with_params(FrFcParams{bias ? 1 : 0, relu});
      c.outputs = {3};
      expect_same(c, 2e-6, std::string("fc bias=") + (bias ? "1" : "0") + " relu=" + std::to_string(relu));
    }
}

TEST(CudaOps, FcBackwardWithFusedReluMask) {
  FRESCO_REQUIRE_GPU();
  OpCase c;  // dy [37,29] (masked in place), x [37,53], w [29,53], y [37,29] -> dw, db, dx
  c.tensors = {{DType::F32, {37, 1, 1, 29}, Fill::RANDOM},
               {DType::F32, kX, Fill::RANDOM},
               {DType::F32, {29, 1, 1, 53}, Fill::RANDOM},
               {DType::F32, {37, 1, 1, 29}, Fill::RANDOM},
               {DType::F32, {29, 1, 1, 53}, Fill::ZERO},
               {DType::F32, {1, 1, 1, 29}, Fill::ZERO},
               {DType::F32, kX, Fill::ZERO}};
  c.node = node(FR_OP_FC_BACKWARD, {0, 1, 2, 3}, {4, 5, 6});
  c.node.with_params(FrFcBackwardParams{1, 1, 1, 0});
  c.outputs = {0, 4, 5, 6};
  expect_same(c, 2e-6, "fc_backward relu_mask");
}

TEST(CudaOps, FcBackward) {
  FRESCO_REQUIRE_GPU();
  OpCase c;  // dy [37,29], x [37,53], w [29,53] -> dw, db, dx
  c.tensors = {{DType::F32, {37, 1, 1, 29}, Fill::RANDOM}, {DType::F32, kX, Fill::RANDOM},
               {DType::F32, {29, 1, 1, 53}, Fill::RANDOM}, {DType::F32, {29, 1, 1, 53}, Fill::ZERO},
               {DType::F32, {1, 1, 1, 29}, Fill::ZERO},    {DType::F32, kX, Fill::ZERO}};
  c.node = node(FR_OP_FC_BACKWARD, {0, 1, 2}, {3, 4, 5});
  c.node.with_params(FrFcBackwardParams{1, 1});
  c.outputs = {3, 4, 5};
  expect_same(c, 2e-6, "fc_backward");
}

TEST(CudaOps, ReluForwardBackward) {
  FRESCO_REQUIRE_GPU();
  OpCase f;
  f.tensors = {{DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::ZERO}};
  f.node = node(FR_OP_RELU, {0}, {1});
  f.outputs = {1};
  expect_same(f, 0.0, "relu");
  OpCase b;
  b.tensors = {{DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::ZERO}};
  b.node = node(FR_OP_RELU_BACKWARD, {0, 1}, {2});
  b.outputs = {2};
  expect_same(b, 0.0, "relu_backward");
}

// add and the element-wise activations: unary forward {x} -> {y}, binary (backward {dy, x or y}; add {a, b}).
TEST(CudaOps, PointwiseForwardBackward) {
  FRESCO_REQUIRE_GPU();
  for (const char* op : {FR_OP_GELU, FR_OP_SILU, FR_OP_SIGMOID, FR_OP_TANH}) {
    OpCase f;
    f.tensors = {{DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::ZERO}};
    f.node = node(op, {0}, {1});
    f.outputs = {1};
    expect_same(f, 1e-6, op);
  }
  for (const char* op : {FR_OP_ADD, FR_OP_ADD_RELU, FR_OP_GELU_BACKWARD, FR_OP_SILU_BACKWARD,
                         FR_OP_SIGMOID_BACKWARD, FR_OP_TANH_BACKWARD}) {
    OpCase b;
    b.tensors = {
        {DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::RANDOM}, {DType::F32, kX, Fill::ZERO}};
    b.node = node(op, {0, 1}, {2});
    b.outputs = {2};
    expect_same(b, 1e-6, op);
  }
  OpCase s;  // add_relu_backward: two gradient parts summed and masked by y
  s.tensors = {{DType::F32, kX, Fill::RANDOM},
               {DType::F32, kX, Fill::RANDOM},
               {DType::F32, kX, Fill::RANDOM},
               {DType::F32, kX, Fill::ZERO}};
  s.node = node(FR_OP_ADD_RELU_BACKWARD, {0, 1, 2}, {3});
  s.outputs = {3};
  expect_same(s, 0.0, "add_relu_backward");
}

// Max and average pools (with padding and overlapping windows), forward and backward, and the global average
// pool; the gradients are gathers on the GPU and scatters/gathers on the CPU.
TEST(CudaOps, Pools) {
  FRESCO_REQUIRE_GPU();
  const Shape x{3, 9, 11, 5};
  for (const FrPoolParams pp :
       {FrPoolParams{3, 3, 2, 2, 1, 1}, FrPoolParams{2, 2, 2, 2, 0, 0}, FrPoolParams{3, 2, 1, 1, 1, 0}}) {
    const int64_t p = (9 + 2 * pp.pad_h - pp.kh) / pp.stride_h + 1,
                  q = (11 + 2 * pp.pad_w - pp.kw) / pp.stride_w + 1;
    const Shape y{3, p, q, 5};
    const std::string geom = " k" + std::to_string(pp.kh) + "x" + std::to_string(pp.kw) + " s" +
                             std::to_string(pp.stride_h) + " p" + std::to_string(pp.pad_h);
    for (const char* op : {FR_OP_MAX_POOL2D, FR_OP_AVG_POOL2D}) {
      OpCase f;
      f.tensors = {{DType::F32, x, Fill::RANDOM}, {DType::F32, y, Fill::ZERO}};
      f.node = node(op, {0}, {1});
      f.node.with_params(pp);
      f.outputs = {1};
      expect_same(f, 1e-6, op + geom);
    }
    for (Fill xf : {Fill::RANDOM, Fill::RELU}) {  // RELU: many tied (zero) maxima
      OpCase mb;
      mb.tensors = {{DType::F32, y, Fill::RANDOM},
                    {DType::F32, x, xf},
                    {DType::F32, y, Fill::ZERO},
                    {DType::F32, x, Fill::ZERO}};
      mb.before = {node(FR_OP_MAX_POOL2D, {1}, {2})};  // y: the forward's output, as the contract says
      mb.before[0].with_params(pp);
      mb.node = node(FR_OP_MAX_POOL2D_BACKWARD, {0, 1, 2}, {3});
      mb.node.with_params(pp);
      mb.outputs = {3};
      expect_same(mb, 1e-6, "max_pool2d_backward" + geom + (xf == Fill::RELU ? " (ties)" : ""));
    }
    OpCase ab;
    ab.tensors = {{DType::F32, y, Fill::RANDOM}, {DType::F32, x, Fill::ZERO}};
    ab.node = node(FR_OP_AVG_POOL2D_BACKWARD, {0}, {1});
    ab.node.with_params(pp);
    ab.outputs = {1};
    expect_same(ab, 1e-6, "avg_pool2d_backward" + geom);
  }
  OpCase g;
  g.tensors = {{DType::F32, x, Fill::RANDOM}, {DType::F32, {3, 1, 1, 5}, Fill::ZERO}};
  g.node = node(FR_OP_GLOBAL_AVG_POOL, {0}, {1});
  g.outputs = {1};
  expect_same(g, 1e-6, "global_avg_pool");
  OpCase gb;
  gb.tensors = {{DType::F32, {3, 1, 1, 5}, Fill::RANDOM}, {DType::F32, x, Fill::ZERO}};
  gb.node = node(FR_OP_GLOBAL_AVG_POOL_BACKWARD, {0}, {1});
  gb.outputs = {1};
  expect_same(gb, 1e-6, "global_avg_pool_backward");
  // channels in whole 16-byte vectors that divide 256 threads (16 and 256 vectors a row: the vector kernel),
  // and 2048 f32 channels (512 vectors a row: the scalar one)
  for (const int64_t c : {int64_t{64}, int64_t{1024}, int64_t{2048}}) {
    OpCase gv;
    gv.tensors = {{DType::F32, {3, 1, 1, c}, Fill::RANDOM}, {DType::F32, {3, 4, 4, c}, Fill::ZERO}};
    gv.node = node(FR_OP_GLOBAL_AVG_POOL_BACKWARD, {0}, {1});
    gv.outputs = {1};
    expect_same(gv, 1e-6, "global_avg_pool_backward c " + std::to_string(c));
  }
}

// Batchnorm training (y, saved mean/invstd, running statistics moved in place), inference, and backward.
// C = 7 takes the scalar kernels, C = 64 the 16-byte vector kernels; batch 4 makes 2 chunks of rows, batch 80
// makes 38 (then two of the finalize's warps add chunks: channel_sums.cuh, channel_totals).
class CudaBatchNorm : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(CudaBatchNorm, MatchesCpu) {
  FRESCO_REQUIRE_GPU();
  const auto [ch, batch] = GetParam();
  const Shape x{batch, 5, 6, ch}, v{1, 1, 1, ch};
  OpCase t;
  t.tensors = {{DType::F32, x, Fill::RANDOM}, {DType::F32, v, Fill::RANDOM},  {DType::F32, v, Fill::RANDOM},
               {DType::F32, x, Fill::ZERO},   {DType::F32, v, Fill::ZERO},    {DType::F32, v, Fill::ZERO},
               {DType::F32, v, Fill::RANDOM}, {DType::F32, v, Fill::POSITIVE}};
  t.node = node(FR_OP_BATCHNORM, {0, 1, 2}, {3, 4, 5});
  t.node.rout = {f32(6), f32(7)};
  t.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  t.outputs = {3, 4, 5, 6, 7};
  expect_same(t, 1e-6, "batchnorm (training)");
  {  // the finalize with sixteen channels per block (FRESCO_CUDA_BN_FINALIZE_CHANNELS; the default is 4)
    const ScopedEnv sixteen("FRESCO_CUDA_BN_FINALIZE_CHANNELS", "16");
    expect_same(t, 1e-6, "batchnorm (training, sixteen channels per finalize block)");
  }
  OpCase sums = t;  // statistics from given sums of x (positive, so the variance is too)
  sums.tensors.push_back({DType::F32, Shape{1, 1, 1, 2 * ch}, Fill::POSITIVE});
  sums.node = node(FR_OP_BATCHNORM, {0, 1, 2, 8}, {3, 4, 5});
  sums.node.rout = {f32(6), f32(7)};
  sums.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  expect_same(sums, 1e-6, "batchnorm (training, sums given)");
  OpCase add_sums = sums;  // batchnorm_add: the sums are its fifth input
  add_sums.tensors.push_back({DType::F32, x, Fill::RANDOM});
  add_sums.node = node(FR_OP_BATCHNORM_ADD, {0, 1, 2, 9, 8}, {3, 4, 5});
  add_sums.node.rout = {f32(6), f32(7)};
  add_sums.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  expect_same(add_sums, 1e-6, "batchnorm_add (sums given)");
  OpCase e;
  e.tensors = {{DType::F32, x, Fill::RANDOM}, {DType::F32, v, Fill::RANDOM},   {DType::F32, v, Fill::RANDOM},
               {DType::F32, v, Fill::RANDOM}, {DType::F32, v, Fill::POSITIVE}, {DType::F32, x, Fill::ZERO}};
  t.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  expect_same(t, 1e-6, "batchnorm (training, fused relu)");
  OpCase add;  // batchnorm_add: bn(x) + r, then relu (the residual join that computes its batchnorm)
  add.tensors = t.tensors;
  add.tensors.push_back({DType::F32, x, Fill::RANDOM});
  add.node = node(FR_OP_BATCHNORM_ADD, {0, 1, 2, 8}, {3, 4, 5});
  add.node.rout = {f32(6), f32(7)};
  add.outputs = {3, 4, 5, 6, 7};
  for (int relu : {0, 1}) {
    add.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, relu});
    expect_same(add, 1e-6, "batchnorm_add relu=" + std::to_string(relu));
  }
  e.node = node(FR_OP_BATCHNORM, {0, 1, 2, 3, 4}, {5});
  e.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
  e.outputs = {5};
  expect_same(e, 1e-6, "batchnorm (inference)");
  OpCase fold;  // the folded inference form: scale and shift from gamma, beta and the running statistics
  fold.tensors = {{DType::F32, v, Fill::RANDOM}, {DType::F32, v, Fill::RANDOM},
                  {DType::F32, v, Fill::RANDOM}, {DType::F32, v, Fill::POSITIVE},
                  {DType::F32, v, Fill::ZERO},   {DType::F32, v, Fill::ZERO}};
  fold.node = node(FR_OP_BATCHNORM_FOLD, {0, 1, 2, 3}, {4, 5});
  fold.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
  fold.outputs = {4, 5};
  expect_same(fold, 1e-6, "batchnorm_fold");  // the shared rule (nvcc may contract the shift into an fma)
  OpCase affine;
  affine.tensors = {{DType::F32, x, Fill::RANDOM},
                    {DType::F32, v, Fill::RANDOM},
                    {DType::F32, v, Fill::RANDOM},
                    {DType::F32, x, Fill::ZERO}};
  affine.node = node(FR_OP_CHANNEL_AFFINE, {0, 1, 2}, {3});
  affine.outputs = {3};
  for (int relu : {0, 1}) {
    affine.node.with_params(FrChannelAffineParams{relu, 0});
    expect_same(affine, 1e-6, "channel_affine relu=" + std::to_string(relu));
  }
  OpCase b;
  b.tensors = {{DType::F32, x, Fill::RANDOM}, {DType::F32, x, Fill::RANDOM},   {DType::F32, v, Fill::RANDOM},
               {DType::F32, v, Fill::RANDOM}, {DType::F32, v, Fill::POSITIVE}, {DType::F32, x, Fill::ZERO},
               {DType::F32, v, Fill::ZERO},   {DType::F32, v, Fill::ZERO}};
  b.node = node(FR_OP_BATCHNORM_BACKWARD, {0, 1, 2, 3, 4}, {5, 6, 7});
  b.outputs = {5, 6, 7};
  expect_same(b, 2e-6, "batchnorm_backward");
  OpCase br = b;  // fused relu: a sixth input y masks dy
  br.tensors.push_back({DType::F32, x, Fill::RANDOM});
  br.node = node(FR_OP_BATCHNORM_BACKWARD, {0, 1, 2, 3, 4, 8}, {5, 6, 7});
  br.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 1});
  expect_same(br, 2e-6, "batchnorm_backward (fused relu)");
  OpCase bg = b;  // the gradient sums handed over (ops.h, "Gradient sums"): a sixth input without a relu
  bg.tensors.push_back({DType::F32, Shape{1, 1, 1, 2 * ch}, Fill::RANDOM});
  bg.node = node(FR_OP_BATCHNORM_BACKWARD, {0, 1, 2, 3, 4, 8}, {5, 6, 7});
  bg.node.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
  expect_same(bg, 2e-6, "batchnorm_backward (gradient sums given)");
  OpCase m;  // the masking passes that write them: {a, b, y, x, save_mean} -> {dx, gsums}
  m.tensors = {{DType::F32, x, Fill::RANDOM},
               {DType::F32, x, Fill::RANDOM},
               {DType::F32, x, Fill::RANDOM},
               {DType::F32, x, Fill::RANDOM},
               {DType::F32, v, Fill::RANDOM},
               {DType::F32, x, Fill::ZERO},
               {DType::F32, Shape{1, 1, 1, 2 * ch}, Fill::ZERO}};
  m.node = node(FR_OP_ADD_RELU_BACKWARD, {0, 1, 2, 3, 4}, {5, 6});
  m.outputs = {5, 6};
  expect_same(m, 1e-6, "add_relu_backward (gradient sums)");
  m.node = node(FR_OP_RELU_BACKWARD, {0, 2, 3, 4}, {5, 6});
  expect_same(m, 1e-6, "relu_backward (gradient sums)");
  OpCase m2 = m;  // two (x, save_mean) pairs: a gsums each
  m2.tensors.push_back({DType::F32, x, Fill::RANDOM});
  m2.tensors.push_back({DType::F32, v, Fill::RANDOM});
  m2.tensors.push_back({DType::F32, Shape{1, 1, 1, 2 * ch}, Fill::ZERO});
  m2.node = node(FR_OP_ADD_RELU_BACKWARD, {0, 1, 2, 3, 4, 7, 8}, {5, 6, 9});
  m2.outputs = {5, 6, 9};
  expect_same(m2, 1e-6, "add_relu_backward (two gradient sums)");
}
INSTANTIATE_TEST_SUITE_P(ChannelsAndBatch, CudaBatchNorm,
                         ::testing::Combine(::testing::Values(7, 64), ::testing::Values(4, 80)));

// conv2d forward/backward over strides, padding, dilation, groups, with and without bias; flatten_chw.
TEST(CudaOps, Conv2dAndFlatten) {
  FRESCO_REQUIRE_GPU();
  struct Geo {
    FrConvParams p;
    int64_t c, k;
  };
  for (const Geo& geo :
       {Geo{{3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 5, 6}, Geo{{3, 3, 2, 2, 1, 1, 1, 1, 1, 0}, 4, 8},
        Geo{{1, 1, 2, 2, 0, 0, 1, 1, 1, 0}, 6, 3}, Geo{{3, 2, 1, 2, 2, 1, 2, 1, 2, 1}, 4, 6}}) {
    const FrConvParams& p = geo.p;
    const int64_t n = 2, h = 9, w = 8;
    const int64_t ph = (h + 2 * p.pad_h - p.dil_h * (p.kh - 1) - 1) / p.stride_h + 1;
    const int64_t pq = (w + 2 * p.pad_w - p.dil_w * (p.kw - 1) - 1) / p.stride_w + 1;
    const Shape xs{n, h, w, geo.c}, ws{geo.k, p.kh, p.kw, geo.c / p.groups}, bs{1, 1, 1, geo.k},
        ys{n, ph, pq, geo.k};
    const std::string what = "conv k" + std::to_string(p.kh) + "x" + std::to_string(p.kw) + " s" +
                             std::to_string(p.stride_h) + " d" + std::to_string(p.dil_h) + " g" +
                             std::to_string(p.groups) + " bias" + std::to_string(p.has_bias);
    OpCase f;
    f.tensors = {{DType::F32, xs, Fill::RANDOM},
                 {DType::F32, ws, Fill::RANDOM},
                 {DType::F32, bs, Fill::RANDOM},
                 {DType::F32, ys, Fill::ZERO}};
    f.node =
        node(FR_OP_CONV2D, p.has_bias ? std::vector<TensorId>{0, 1, 2} : std::vector<TensorId>{0, 1}, {3});
    f.node.with_params(p);
    f.outputs = {3};
    expect_same(f, 2e-6, what);
    if (!p.has_bias) {  // the sums output for a batchnorm (ops.h): f32 here, so the separate sums pass
      OpCase fs = f;
      fs.tensors.push_back({DType::F32, Shape{1, 1, 1, 2 * geo.k}, Fill::RANDOM});  // written, not added to
      fs.node = node(FR_OP_CONV2D, {0, 1}, {3, 4});
      fs.node.with_params(p);
      fs.outputs = {3, 4};
      expect_same(fs, 1e-5, what + " with sums");
    }
    OpCase b;
    b.tensors = {{DType::F32, ys, Fill::RANDOM}, {DType::F32, xs, Fill::RANDOM},
                 {DType::F32, ws, Fill::RANDOM}, {DType::F32, ws, Fill::ZERO},
                 {DType::F32, bs, Fill::ZERO},   {DType::F32, xs, Fill::ZERO}};
    b.node = node(FR_OP_CONV2D_BACKWARD, {0, 1, 2},
                  p.has_bias ? std::vector<TensorId>{3, 4, 5} : std::vector<TensorId>{3, 5});
    b.node.with_params(FrConvBackwardParams{p, 1, 0});
    b.outputs = p.has_bias ? std::vector<TensorId>{3, 4, 5} : std::vector<TensorId>{3, 5};
    expect_same(b, 2e-6, what + " backward");
    OpCase input = b;  // the split backward: input gradient alone, then weight gradient alone
    input.node = node(FR_OP_CONV2D_BACKWARD, {0, 1, 2}, {5});
    input.node.with_params(FrConvBackwardParams{p, 1, 1});
    input.outputs = {5};
    expect_same(input, 2e-6, what + " backward part 1");
    OpCase weight = b;
    weight.node = node(FR_OP_CONV2D_BACKWARD, {0, 1, 2},
                       p.has_bias ? std::vector<TensorId>{3, 4} : std::vector<TensorId>{3});
    weight.node.with_params(FrConvBackwardParams{p, 1, 2});
    weight.outputs = p.has_bias ? std::vector<TensorId>{3, 4} : std::vector<TensorId>{3};
    expect_same(weight, 2e-6, what + " backward part 2");
  }
  const Shape ca{3, 5, 7, 6}, cb{3, 5, 7, 10}, cy{3, 5, 7, 16};
  OpCase cat;
  cat.tensors = {
      {DType::F32, ca, Fill::RANDOM}, {DType::F32, cb, Fill::RANDOM}, {DType::F32, cy, Fill::ZERO}};
  cat.node = node(FR_OP_CONCAT, {0, 1}, {2});
  cat.outputs = {2};
  expect_same(cat, 0.0, "concat");
  OpCase split;
  split.tensors = {
      {DType::F32, cy, Fill::RANDOM}, {DType::F32, ca, Fill::ZERO}, {DType::F32, cb, Fill::ZERO}};
  split.node = node(FR_OP_CONCAT_BACKWARD, {0}, {1, 2});
  split.outputs = {1, 2};
  expect_same(split, 0.0, "concat_backward");
  const Shape m{3, 5, 7, 6}, flat{3, 1, 1, 210};
  OpCase f;
  f.tensors = {{DType::F32, m, Fill::RANDOM}, {DType::F32, flat, Fill::ZERO}};
  f.node = node(FR_OP_FLATTEN_CHW, {0}, {1});
  f.outputs = {1};
  expect_same(f, 0.0, "flatten_chw");
  OpCase b;
  b.tensors = {{DType::F32, flat, Fill::RANDOM}, {DType::F32, m, Fill::ZERO}};
  b.node = node(FR_OP_FLATTEN_CHW_BACKWARD, {0}, {1});
  b.outputs = {1};
  expect_same(b, 0.0, "flatten_chw_backward");
}

TEST(CudaOps, DropoutSameMaskAsCpu) {
  FRESCO_REQUIRE_GPU();
  for (const char* op : {FR_OP_DROPOUT, FR_OP_DROPOUT_BACKWARD}) {
    OpCase c;
    c.tensors = {{DType::F32, kX, Fill::RANDOM},
                 {DType::F32, kX, Fill::ZERO},
                 {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
    c.node = node(op, {0}, {1});
    c.node.rin = {bytes(2)};
    c.node.with_params(FrDropoutParams{0.3f, 4});
    c.outputs = {1};
    expect_same(c, 0.0, op);
  }
}

// The same bits as the CPU (both compute the two divisions per value): small, the MLP's batch of 1024
// Fashion-MNIST images (sixteen values per thread, no remainder) and CIFAR-shaped with labels (a remainder
// of 7 values past the 16-wide chunks). Unaligned operands: fresco-plugin-check's variant cases.
TEST(CudaOps, NormalizeInput) {
  FRESCO_REQUIRE_GPU();
  for (auto [n, hw, ch] : {std::tuple<int64_t, int64_t, int>{5, 7, 3}, {1024, 28, 1}, {17, 31, 3}}) {
    OpCase c;
    const Shape x{n, hw, hw, ch};
    c.tensors = {{DType::U8, x, Fill::BYTES},
                 {DType::F32, x, Fill::ZERO},
                 {DType::I32, {n, 1, 1, 1}, Fill::LABELS},
                 {DType::I32, {n, 1, 1, 1}, Fill::ZERO}};
    const bool labels = n == 17;
    c.node = labels ? node(FR_OP_NORMALIZE_INPUT, {0, 2}, {1, 3}) : node(FR_OP_NORMALIZE_INPUT, {0}, {1});
    c.node.with_params(ch == 3 ? FrNormalizeParams{3, {0.49f, 0.48f, 0.45f, 0}, {0.25f, 0.24f, 0.26f, 1}}
                               : FrNormalizeParams{1, {0.286f, 0, 0, 0}, {0.353f, 1, 1, 1}});
    c.outputs = labels ? std::vector<TensorId>{1, 3} : std::vector<TensorId>{1};
    expect_same(c, 0.0, "normalize_input n=" + std::to_string(n));
  }
}

TEST(CudaOps, SoftmaxCrossEntropy) {
  FRESCO_REQUIRE_GPU();
  for (float eps : {0.0f, 0.1f}) {
    for (int64_t m : {1, 37, 1024}) {
      OpCase c;
      c.tensors = {{DType::F32, {m, 1, 1, 10}, Fill::RANDOM},
                   {DType::I32, {m, 1, 1, 1}, Fill::LABELS},
                   {DType::F32, {m, 1, 1, 10}, Fill::ZERO},
                   {DType::F32, {1, 1, 1, 4}, Fill::ZERO}};
      c.node = node(FR_OP_SOFTMAX_XENT, {0, 1}, {2});
      c.node.rout = {bytes(3)};
      c.node.with_params(FrSoftmaxXentParams{eps, 1});
      c.outputs = {2, 3};
      expect_same(c, 1e-6, "softmax_xent m=" + std::to_string(m));
    }
  }
}

// The fused training head (fc_softmax_xent) as one node: x (a relu's output), w, labels below labels_below
// (from n on invalid), b -> logits, dlogits, dx, and the batch results (tensor 7); outputs in that order.
OpCase fused_head_case(int64_t m, int64_t n, int64_t k, int bias, int mask, int labels_below) {
  OpCase c;
  c.tensors = {{DType::F32, {m, 1, 1, k}, Fill::RELU},
               {DType::F32, {n, 1, 1, k}, Fill::RANDOM},
               {DType::I32, {m, 1, 1, 1}, Fill::LABELS, labels_below},
               {DType::F32, {1, 1, 1, n}, Fill::RANDOM},
               {DType::F32, {m, 1, 1, n}, Fill::ZERO},
               {DType::F32, {m, 1, 1, n}, Fill::ZERO},
               {DType::F32, {m, 1, 1, k}, Fill::ZERO},
               {DType::F32, {1, 1, 1, 4}, Fill::ZERO}};
  c.node = bias ? node(FR_OP_FC_SOFTMAX_XENT, {0, 1, 2, 3}, {4, 5, 6})
                : node(FR_OP_FC_SOFTMAX_XENT, {0, 1, 2}, {4, 5, 6});
  c.node.rout = {bytes(7)};
  c.node.with_params(FrFcSoftmaxXentParams{bias, mask, 0.1f, 0});
  c.outputs = {4, 5, 6, 7};
  return c;
}

// The fused head against the CPU kernel: logits, dlogits, dx (masked or not) and the batch results.
TEST(CudaOps, FcSoftmaxXentHead) {
  FRESCO_REQUIRE_GPU();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 10, 256},
                         {37, 10, 256},
                         {1024, 10, 256},
                         {65, 32, 33},
                         {100, 10, 300},  // the register kernels' two widths (k <= 256, 512), then the
                         {70, 16, 1024},  // general kernel; w in shared memory and not (16 x 1024)
                         {9, 3, 5000}})
    for (int mask = 0; mask < 2; ++mask) {
      const int bias = mask;  // bias with the mask, none without: both paths of each
      expect_same(fused_head_case(m, n, k, bias, mask, static_cast<int>(n)), 1e-5,
                  "fc_softmax_xent m=" + std::to_string(m) + " n=" + std::to_string(n) +
                      " k=" + std::to_string(k) + " mask=" + std::to_string(mask));
    }
}

// The fused head against the separate nodes it replaces, both on CUDA (small-fc forward, the loss, the
// small-fc input gradient, relu_backward as the previous layer's mask), bit for bit: shapes that reach every
// kernel of the node (the register kernel's widths 8 / 12 / 16 / 32 classes at k <= 256 and 8 / 12 / 16 at k
// <= 512, then the general kernel with w in shared memory and not), and labels that include an invalid one
// (the class count n: its loss is NaN and its gradient row 0).
TEST(CudaOps, FcSoftmaxXentHeadSameBitsAsTheSeparateNodes) {
  FRESCO_REQUIRE_GPU();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 5, 100},
                         {64, 10, 256},
                         {50, 14, 256},
                         {33, 20, 200},
                         {40, 3, 400},
                         {100, 10, 300},
                         {30, 16, 512},
                         {20, 16, 1024},
                         {9, 20, 600}})
    for (int mask = 0; mask < 2; ++mask) {
      const int bias = 1 - mask;  // each shape with and without bias, without and with the mask
      const OpCase fused = fused_head_case(m, n, k, bias, mask, static_cast<int>(n) + 1);
      OpCase apart;
      apart.tensors = fused.tensors;  // and tensor 8: the masked dx that relu_backward writes
      apart.tensors.push_back({DType::F32, {m, 1, 1, k}, Fill::ZERO});
      GraphNode fc = bias ? node(FR_OP_FC, {0, 1, 3}, {4}) : node(FR_OP_FC, {0, 1}, {4});
      fc.with_params(FrFcParams{bias, 0});
      GraphNode loss = node(FR_OP_SOFTMAX_XENT, {4, 2}, {5});
      loss.rout = {bytes(7)};
      loss.with_params(FrSoftmaxXentParams{0.1f, 1});
      GraphNode input_grad = node(FR_OP_FC_BACKWARD, {5, 0, 1}, {6});
      input_grad.with_params(FrFcBackwardParams{bias, 1, 0, 1});
      apart.before = {fc, loss};
      if (mask) {
        apart.before.push_back(input_grad);
        apart.node = node(FR_OP_RELU_BACKWARD, {6, 0}, {8});
        apart.outputs = {4, 5, 8, 7};
      } else {
        apart.node = input_grad;
        apart.outputs = {4, 5, 6, 7};
      }
      for (uint32_t seed : {1u, 2u}) {
        const auto a = run_case("cuda", fused, seed), b = run_case("cuda", apart, seed);
        ASSERT_EQ(a.size(), b.size());
        const char* names[] = {"logits", "dlogits", "dx", "batch results"};
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_TRUE(a[i] == b[i]) << names[i] << " differ: m=" << m << " n=" << n << " k=" << k
                                    << " mask=" << mask << " seed " << seed;
      }
    }
}

// The weight copy (ops.h, FR_KERNEL_WEIGHT_COPY): sgd_update (Nesterov, plain) and adam_update with a last
// f16 / bf16 range give the bits of the same update followed by cast_range W -> copy, on a step taken and a
// skipped one, on two sizes with a tail past the 4-wide groups (one of a single block, one of many); the
// tensors' slots are aligned, so this is the vector path with its one-by-one tail.
TEST(CudaOps, WeightCopyIsTheCastOfTheUpdatedWeights) {
  FRESCO_REQUIRE_GPU();
  for (DType low : {DType::F16, DType::BF16})
    for (int which = 0; which < 3; ++which)  // sgd nesterov, plain sgd, adamw
      for (Fill scalars : {Fill::SCALARS, Fill::SCALARS_SKIP})
        for (int64_t n : {int64_t{4096 + 17}, int64_t{8192 * 33 + 3}}) {
          const Shape s{1, 1, 1, n};
          // w, m, v, g, scalars, the copy
          OpCase fused;
          fused.tensors = {{DType::F32, s, Fill::RANDOM},
                           {DType::F32, s, Fill::RANDOM},
                           {DType::F32, s, Fill::POSITIVE},
                           {DType::F32, s, Fill::RANDOM},
                           {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, scalars},
                           {low, s, Fill::ZERO}};
          // the ranges hold the tensors' values, not their slots' padding: n elements, a tail past the
          // 4-wide groups
          auto vals = [](TensorId id, DType t = DType::F32) { return RangeRef::values_of(id, t); };
          std::vector<RangeRef> rout = {vals(0)};
          if (which != 1) rout.push_back(vals(1));
          if (which == 2) rout.push_back(vals(2));
          fused.node =
              range_node(which == 2 ? FR_OP_ADAM_UPDATE : FR_OP_SGD_UPDATE, {vals(3), bytes(4)}, rout);
          if (which == 2)
            fused.node.with_params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, 0});
          else
            fused.node.with_params(FrSgdParams{which == 0 ? 0.9f : 0.0f, 5e-4f, which == 0 ? 1 : 0, 0});
          OpCase apart = fused;
          apart.before = {apart.node};
          apart.node = range_node(FR_OP_CAST_RANGE, {vals(0)}, {vals(5, low)});
          fused.node.rout.push_back(vals(5, low));
          fused.outputs = apart.outputs = {0, 1, 2, 5};
          const std::string what = std::string(which == 2   ? "adamw"
                                               : which == 1 ? "sgd"
                                                            : "sgd nesterov") +
                                   " " + dtype_name(low) + " n=" + std::to_string(n) +
                                   (scalars == Fill::SCALARS_SKIP ? " skipped" : "");
          const auto a = run_case("cuda", fused, 3), b = run_case("cuda", apart, 3);
          ASSERT_EQ(a.size(), b.size());
          const char* names[] = {"w", "m", "v", "copy"};
          for (size_t i = 0; i < a.size(); ++i)
            EXPECT_TRUE(a[i] == b[i]) << what << ": " << names[i] << " differs";
        }
}

TEST(CudaOps, RangeOps) {
  FRESCO_REQUIRE_GPU();
  OpCase clear;
  clear.tensors = {{DType::F32, {1, 1, 1, 1000}, Fill::RANDOM}};
  clear.node = range_node(FR_OP_CLEAR, {}, {f32(0)});
  clear.outputs = {0};
  expect_same(clear, 0.0, "clear");
  OpCase copy;
  copy.tensors = {{DType::F32, {1, 1, 1, 1000}, Fill::RANDOM}, {DType::F32, {1, 1, 1, 1000}, Fill::ZERO}};
  copy.node = range_node(FR_OP_COPY, {f32(0)}, {f32(1)});
  copy.outputs = {1};
  expect_same(copy, 0.0, "copy");
  OpCase acc;
  acc.tensors = {{DType::F32, {1, 1, 1, 4}, Fill::POSITIVE}, {DType::F32, {1, 1, 1, 8}, Fill::ZERO}};
  acc.node = range_node(FR_OP_ACCUMULATE_METRICS, {bytes(0)}, {bytes(1)});
  acc.outputs = {1};
  expect_same(acc, 0.0, "accumulate_metrics");
  OpCase sched;
  sched.tensors = {{DType::F32, {1, 1, 1, 4}, Fill::RANDOM},
                   {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
  sched.node = range_node(FR_OP_LR_SCHEDULE, {f32(0)}, {bytes(1)});
  sched.node.with_params(FrScheduleParams{FR_SCHED_COSINE, 2, 10, 0.1f, 0.001f, 0});
  sched.outputs = {1};
  expect_same(sched, 1e-7, "lr_schedule");
  OpCase done;
  done.tensors = {{DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
  done.node = range_node(FR_OP_STEP_DONE, {}, {bytes(0)});
  done.outputs = {0};
  expect_same(done, 0.0, "step_done");
  for (int64_t n : {1000, 1001}) {  // four values per thread, and one
    OpCase unscale;
    unscale.tensors = {{DType::F32, {1, 1, 1, n}, Fill::RANDOM},
                       {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
    unscale.node = range_node(FR_OP_UNSCALE_GRADS, {}, {f32(0), bytes(1)});
    unscale.outputs = {0, 1};
    expect_same(unscale, 0.0, "unscale_grads");
  }
  OpCase scale;
  scale.tensors = {{DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
  scale.node = range_node(FR_OP_LOSS_SCALE_UPDATE, {}, {bytes(0)});
  scale.node.with_params(FrLossScaleParams{2.0f, 0.5f, 1, 0});  // interval 1: grows at once
  scale.outputs = {0};
  expect_same(scale, 0.0, "loss_scale_update");
}

TEST(CudaOps, Optimizers) {
  FRESCO_REQUIRE_GPU();
  const Shape s{1, 1, 1, 4096 + 17};
  OpCase sgd;  // w, buf, g, scalars
  sgd.tensors = {{DType::F32, s, Fill::RANDOM},
                 {DType::F32, s, Fill::RANDOM},
                 {DType::F32, s, Fill::RANDOM},
                 {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
  sgd.node = range_node(FR_OP_SGD_UPDATE, {f32(2), bytes(3)}, {f32(0), f32(1)});
  sgd.node.with_params(FrSgdParams{0.9f, 5e-4f, 1, 0});
  sgd.outputs = {0, 1};
  expect_same(sgd, 1e-7, "sgd nesterov");
  // The momentum of the scalars' step (5, not the update count 3) from a per-step table (ops.h), bound by
  // its values as the compiler binds it; a table of 2 holds its last value past its end.
  for (int64_t len : {7, 2}) {
    OpCase cycled = sgd;
    cycled.tensors[3].fill = Fill::SCALARS_AHEAD;
    cycled.tensors.push_back({DType::F32, {1, 1, 1, len}, Fill::POSITIVE});
    cycled.node.rin.push_back(RangeRef::values_of(4, DType::F32));
    // (an H100 measured 1.1e-7 once: the device's fused multiply-adds against the CPU's separate ones)
    expect_same(cycled, 2e-7, "sgd with a momentum table of " + std::to_string(len));
  }
  for (int64_t n : {int64_t{4096 + 17}, int64_t{3 * 8192 + 5}, int64_t{1024 * 8192 + 77}}) {
    // one tensor's trust ratio, its norms added in another order than the CPU's: one block's, several
    // blocks', and the most blocks' with more than 8192 values each. The buffer starts at 0, so its output
    // is q (g + wd w) and shows an error in the ratio itself (a block's partial lost or counted twice moves
    // it by about 1 / (2 blocks)); a large decay makes its part of the norm count.
    OpCase lars = sgd;
    for (int i = 0; i < 3; ++i) lars.tensors[static_cast<size_t>(i)].shape = Shape{1, 1, 1, n};
    lars.tensors[1].fill = Fill::ZERO;
    lars.node.op = FR_OP_LARS_UPDATE;
    lars.node.with_params(FrLarsParams{0.9f, 0.1f, 0.02f, 0});
    expect_same(lars, 1e-6, "lars n=" + std::to_string(n));
    lars.tensors[3].fill = Fill::SCALARS_AHEAD;
    lars.tensors.push_back({DType::F32, {1, 1, 1, 7}, Fill::POSITIVE});
    lars.node.rin.push_back(RangeRef::values_of(4, DType::F32));
    expect_same(lars, 1e-6, "lars with a momentum table n=" + std::to_string(n));
  }
  for (int decoupled : {0, 1}) {
    OpCase adam;  // w, m, v, g, scalars
    adam.tensors = {{DType::F32, s, Fill::RANDOM},
                    {DType::F32, s, Fill::RANDOM},
                    {DType::F32, s, Fill::POSITIVE},
                    {DType::F32, s, Fill::RANDOM},
                    {DType::U8, {1, 1, 1, sizeof(FrStepScalars)}, Fill::SCALARS}};
    adam.node = range_node(FR_OP_ADAM_UPDATE, {f32(3), bytes(4)}, {f32(0), f32(1), f32(2)});
    adam.node.with_params(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, decoupled, 0});
    adam.outputs = {0, 1, 2};
    expect_same(adam, 1e-6, decoupled ? "adamw" : "adam");
    // beta1 per step, at step 5 with bias corrections for 3 updates; a table of 2: the last past its end
    adam.tensors[4].fill = Fill::SCALARS_AHEAD;
    for (int64_t len : {7, 2}) {
      OpCase table = adam;
      table.tensors.push_back({DType::F32, {1, 1, 1, len}, Fill::POSITIVE});
      table.node.rin.push_back(RangeRef::values_of(5, DType::F32));
      expect_same(
          table, 1e-6,
          std::string(decoupled ? "adamw" : "adam") + " with a beta1 table of " + std::to_string(len));
    }
  }
}

namespace {
// fc forward (bias, fused relu) and its full backward (relu mask, dw, db, dx) on an m x k -> n layer, vs the
// CPU.
void expect_fc_matches_cpu(int64_t m, int64_t k, int64_t n, const std::string& what) {
  const std::string shape =
      what + " " + std::to_string(m) + "x" + std::to_string(k) + "->" + std::to_string(n);
  OpCase f;
  f.tensors = {{DType::F32, {m, 1, 1, k}, Fill::RANDOM},
               {DType::F32, {n, 1, 1, k}, Fill::RANDOM},
               {DType::F32, {1, 1, 1, n}, Fill::RANDOM},
               {DType::F32, {m, 1, 1, n}, Fill::ZERO}};
  f.node = node(FR_OP_FC, {0, 1, 2}, {3});
  f.node.with_params(FrFcParams{1, 1});
  f.outputs = {3};
  f.runs = 3;  // replays: split-K configurations keep ordering counters in the workspace
  expect_same(f, 2e-6, "fc+relu " + shape);
  OpCase b;
  b.tensors = {{DType::F32, {m, 1, 1, n}, Fill::RANDOM}, {DType::F32, {m, 1, 1, k}, Fill::RANDOM},
               {DType::F32, {n, 1, 1, k}, Fill::RANDOM}, {DType::F32, {m, 1, 1, n}, Fill::RANDOM},
               {DType::F32, {n, 1, 1, k}, Fill::ZERO},   {DType::F32, {1, 1, 1, n}, Fill::ZERO},
               {DType::F32, {m, 1, 1, k}, Fill::ZERO}};
  b.node = node(FR_OP_FC_BACKWARD, {0, 1, 2, 3}, {4, 5, 6});
  b.node.with_params(FrFcBackwardParams{1, 1, 1, 0});
  b.outputs = {0, 4, 5, 6};
  b.runs = 3;  // masking dy in place is idempotent
  expect_same(b, 2e-6, "fc_backward relu_mask " + shape);
}

}  // namespace

TEST(CudaOps, FcOnTheMlpShapes) {
  FRESCO_REQUIRE_GPU();
  struct S {
    int64_t m, k, n;
  };
  for (const S s : {S{128, 784, 1024}, S{128, 1024, 512}, S{128, 512, 256}, S{128, 256, 10}, S{32, 784, 1024},
                    S{1024, 784, 1024}})
    expect_fc_matches_cpu(s.m, s.k, s.n, "chosen algorithm");
}

// The bias gradient over batches of the sizes training uses and ragged ones, with the relu mask (the full
// backward) and without it (dw, db from dy as given).
void expect_fc_bias_gradient(int64_t m) {
  expect_fc_matches_cpu(m, 53, 40, "many rows");
  OpCase weight;
  weight.tensors = {{DType::F32, {m, 1, 1, 40}, Fill::RANDOM},
                    {DType::F32, {m, 1, 1, 53}, Fill::RANDOM},
                    {DType::F32, {40, 1, 1, 53}, Fill::RANDOM},
                    {DType::F32, {40, 1, 1, 53}, Fill::ZERO},
                    {DType::F32, {1, 1, 1, 40}, Fill::ZERO}};
  weight.node = node(FR_OP_FC_BACKWARD, {0, 1, 2}, {3, 4});
  weight.node.with_params(FrFcBackwardParams{1, 0, 0, 2});
  weight.outputs = {0, 3, 4};
  weight.runs = 2;
  expect_same(weight, 2e-6, "fc_backward part 2, rows " + std::to_string(m));
}

// Both ways to the bias gradient: the weight gradient's GEMM (cuBLASLt's BGRADB epilogue, the default where
// cuBLASLt offers it: its search key then ends in ",20") and the column-sum pass (ops/column_sums.cu,
// FRESCO_CUBLAS_BGRAD=0).
TEST(CudaOps, FcBiasGradientOnManyRows) {
  FRESCO_REQUIRE_GPU();
  for (const char* fused : {"1", "0"})
    for (const int64_t m : {256, 700, 1030}) {
      const ScopedEnv bgrad("FRESCO_CUBLAS_BGRAD", fused), log("FRESCO_CUBLAS_LOG", "1");
      testing::internal::CaptureStderr();
      expect_fc_bias_gradient(m);
      const std::string choices = testing::internal::GetCapturedStderr();
      const bool epilogue = choices.find("matmul 10,40,53," + std::to_string(m) + ",20") != std::string::npos;
      if (fused[0] == '0') {
        EXPECT_FALSE(epilogue) << choices;
      } else {  // the epilogue, or the log says why not for this problem
        const std::string why =
            "fc weight gradient 40x53x" + std::to_string(m) + ": no bias-gradient epilogue";
        EXPECT_TRUE(epilogue || choices.find(why) != std::string::npos) << choices;
        std::printf("rows %lld: bias gradient %s\n", static_cast<long long>(m),
                    epilogue ? "by the GEMM's epilogue" : "by the column sums (no epilogue offered)");
      }
    }
}

TEST(CudaOps, FcOnTheOwnGemm) {
  FRESCO_REQUIRE_GPU();
  // FRESCO_CUDA_SGEMM=2: every fc GEMM that fits runs on ops/sgemm.cu (its fastest configuration), forward
  // with bias and relu, both gradients; one it does not take stays on cuBLASLt (n = 34: no product fits; 37 x
  // 52 -> 68: the weight gradient's k = 37 is not a multiple of 4). The variables are read when a context is
  // created, i.e. by each case's task; the search's log (FRESCO_CUBLAS_LOG) says which kernel was chosen.
  const ScopedEnv own("FRESCO_CUDA_SGEMM", "2"), log("FRESCO_CUBLAS_LOG", "1");
  struct S {
    int64_t m, k, n;
    bool own, lt;  // some product chosen on the own kernel / on cuBLASLt
  };
  for (const S s : {S{128, 784, 1024, true, false}, S{1024, 512, 256, true, false}, S{37, 52, 68, true, true},
                    S{40, 36, 34, false, true}}) {
    testing::internal::CaptureStderr();
    expect_fc_matches_cpu(s.m, s.k, s.n, "own gemm");
    const std::string choices = testing::internal::GetCapturedStderr();
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.k) + "->" + std::to_string(s.n);
    const bool own_chosen =
        std::regex_search(choices, std::regex("chosen #[0-9]+ \\([0-9]+x[0-9]+k[0-9]+/s[0-9]+\\)"));
    const bool lt_chosen = choices.find("(cuBLASLt ") != std::string::npos;
    EXPECT_EQ(own_chosen, s.own) << shape << "\n" << choices;
    EXPECT_EQ(lt_chosen, s.lt) << shape << "\n" << choices;
  }
}

// Timed cuBLASLt choices are kept in the tuning cache (plugins/cuda/tuning/tuning_cache.h): the first run of
// these problems times them (and its later contexts already reuse the file); a second run takes every choice
// from the file, the same ones, without timing.
TEST(CudaOps, TimedMatmulChoicesComeBackFromTheTuningCache) {
  FRESCO_REQUIRE_GPU();
  const std::string path = testing::TempDir() + "fresco_matmul_tuning_" + std::to_string(getpid()) + ".tsv";
  std::remove(path.c_str());
  const ScopedEnv cache("FRESCO_CUDA_TUNING_CACHE", path), log("FRESCO_CUBLAS_LOG", "1"),
      autotune("FRESCO_CUBLAS_AUTOTUNE", "2"), own("FRESCO_CUDA_SGEMM", "0");
  const std::regex line("\\[fresco-cuda\\] matmul ([^:]+):.*(chosen #[0-9]+ \\([^)]*\\)).*");
  std::map<std::string, std::string> picks[2];  // problem -> choice
  int timed[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    testing::internal::CaptureStderr();
    expect_fc_matches_cpu(1024, 784, 1024, run ? "second run" : "first run");
    std::istringstream err(testing::internal::GetCapturedStderr());
    for (std::string l; std::getline(err, l);) {
      std::smatch m;
      if (!std::regex_match(l, m, line)) continue;
      if (l.find("(tuning cache)") == std::string::npos) ++timed[run];
      const auto [it, fresh] = picks[run].emplace(m[1].str(), m[2].str());
      EXPECT_TRUE(fresh || it->second == m[2].str()) << l;  // one choice per problem within a run too
    }
  }
  EXPECT_GE(picks[0].size(), 3u);  // the forward, the backward's dX and dW
  EXPECT_GE(timed[0], 3);
  EXPECT_EQ(timed[1], 0);
  EXPECT_EQ(picks[0], picks[1]);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("matmul "), std::string::npos) << text;
  std::remove(path.c_str());
}

TEST(CudaOps, FcWithFewOutputs) {
  FRESCO_REQUIRE_GPU();
  // ops/small_fc.cu takes n <= 32: each register width (8, 16, 32), its edges, odd k, one row, many rows; n =
  // 33 is cuBLASLt again.
  struct S {
    int64_t m, k, n;
  };
  for (const S s : {S{1, 5, 1}, S{37, 53, 8}, S{37, 53, 9}, S{64, 300, 16}, S{64, 300, 17}, S{64, 300, 32},
                    S{64, 300, 33}, S{1024, 256, 10}, S{700, 1, 3}})
    expect_fc_matches_cpu(s.m, s.k, s.n, "few outputs");
}

TEST(CudaOps, FcBackwardParts) {
  FRESCO_REQUIRE_GPU();
  // part 1: mask dy in place and dx = dy w; part 2: dw, db from dy as given.
  OpCase input;
  input.tensors = {{DType::F32, {37, 1, 1, 29}, Fill::RANDOM},
                   {DType::F32, kX, Fill::RANDOM},
                   {DType::F32, {29, 1, 1, 53}, Fill::RANDOM},
                   {DType::F32, {37, 1, 1, 29}, Fill::RANDOM},
                   {DType::F32, kX, Fill::ZERO}};
  input.node = node(FR_OP_FC_BACKWARD, {0, 1, 2, 3}, {4});
  input.node.with_params(FrFcBackwardParams{1, 1, 1, 1});
  input.outputs = {0, 4};
  expect_same(input, 2e-6, "fc_backward part 1");
  OpCase weight;
  weight.tensors = {{DType::F32, {37, 1, 1, 29}, Fill::RANDOM},
                    {DType::F32, kX, Fill::RANDOM},
                    {DType::F32, {29, 1, 1, 53}, Fill::RANDOM},
                    {DType::F32, {29, 1, 1, 53}, Fill::ZERO},
                    {DType::F32, {1, 1, 1, 29}, Fill::ZERO}};
  weight.node = node(FR_OP_FC_BACKWARD, {0, 1, 2}, {3, 4});
  weight.node.with_params(FrFcBackwardParams{1, 0, 0, 2});
  weight.outputs = {0, 3, 4};
  expect_same(weight, 2e-6, "fc_backward part 2");
}
