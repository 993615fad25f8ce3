// Conformance of the CPU normalize_input kernel: uint8 NHWC -> f32 y = (x/255 - mean[c]) / std[c] against the
// double reference for 1, 3 and 4 channels and odd shapes (including sizes past the parallel grain and all
// 256 byte values); a channel count that disagrees with the tensor, more than FR_MAX_NORM_CHANNELS, a non-u8
// input or bad params return errors. Part of test_cpu_ops.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "plugins/cpu/op_harness.h"
#include "reference/normalize_input.h"

namespace {

using fresco::test::OpCall;
using fresco::test::tensor;

FrNormalizeParams norm_params(int channels) {
  FrNormalizeParams p{};
  p.channels = channels;
  const float mean[] = {0.4914f, 0.4822f, 0.4465f, 0.5f};
  const float stdev[] = {0.2470f, 0.2435f, 0.2616f, 0.125f};
  for (int c = 0; c < FR_MAX_NORM_CHANNELS; ++c) {
    p.mean[c] = mean[c];
    p.std[c] = stdev[c];
  }
  return p;
}

struct NhwcShape {
  int64_t n, h, w, c;
};

TEST(CpuNormalizeInput, MatchesReference) {
  const NhwcShape shapes[] = {{1, 1, 1, 1},    {3, 5, 7, 1}, {37, 28, 28, 1}, {2, 3, 5, 3},
                              {16, 32, 32, 3}, {3, 7, 9, 4}, {1, 256, 1, 1}};
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const NhwcShape& s : shapes) {
    SCOPED_TRACE("shape " + std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) +
                 "x" + std::to_string(s.c));
    std::vector<uint8_t> x(static_cast<size_t>(s.n * s.h * s.w * s.c));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(s.n == 1 && s.h == 256 ? i : byte(rng));
    std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
    const FrNormalizeParams p = norm_params(static_cast<int>(s.c));
    OpCall c(FR_OP_NORMALIZE_INPUT);
    c.in(tensor(x, {s.n, s.h, s.w, s.c})).out(tensor(y, {s.n, s.h, s.w, s.c})).params(p);
    ASSERT_TRUE(c.run());
    EXPECT_TRUE(
        fresco::test::all_close(y, fresco::ref::normalize_input(x, p.channels, p.mean, p.std), 1e-6, 1e-6));
  }
}

TEST(CpuNormalizeInput, BadInputsReturnErrors) {
  std::vector<uint8_t> x(2 * 3 * 3 * 3, 128);
  std::vector<float> y(x.size()), y_short(x.size() - 1), xf(x.size());
  {
    OpCall c(FR_OP_NORMALIZE_INPUT);  // params say 1 channel, tensor has 3
    c.in(tensor(x, {2, 3, 3, 3})).out(tensor(y, {2, 3, 3, 3})).params(norm_params(1));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "channels")) << c.run_error();
  }
  {
    std::vector<uint8_t> x5(2 * 5);
    std::vector<float> y5(x5.size());
    OpCall c(FR_OP_NORMALIZE_INPUT);  // more channels than FR_MAX_NORM_CHANNELS
    c.in(tensor(x5, {2, 1, 1, 5})).out(tensor(y5, {2, 1, 1, 5})).params(norm_params(5));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "channels")) << c.run_error();
  }
  {
    OpCall c(FR_OP_NORMALIZE_INPUT);  // f32 input
    c.in(tensor(xf, {2, 3, 3, 3})).out(tensor(y, {2, 3, 3, 3})).params(norm_params(3));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "dtype")) << c.run_error();
  }
  {
    OpCall c(FR_OP_NORMALIZE_INPUT);  // output of another size
    c.in(tensor(x, {2, 3, 3, 3})).out(tensor(y_short, {1, 1, 1, static_cast<int64_t>(y_short.size())}));
    c.params(norm_params(3));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "sizes differ")) << c.run_error();
  }
  {
    OpCall c(FR_OP_NORMALIZE_INPUT);  // params of the wrong size
    const int32_t channels = 3;
    c.in(tensor(x, {2, 3, 3, 3})).out(tensor(y, {2, 3, 3, 3})).raw_params(&channels, sizeof(channels));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "params size")) << c.run_error();
  }
  {
    OpCall c(FR_OP_NORMALIZE_INPUT);  // no output
    c.in(tensor(x, {2, 3, 3, 3})).params(norm_params(3));
    EXPECT_TRUE(fresco::test::contains(c.run_error(), "expected at least")) << c.run_error();
  }
}

}  // namespace
