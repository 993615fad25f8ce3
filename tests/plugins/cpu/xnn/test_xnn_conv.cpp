// fp32 forward convolutions on XNNPACK (plugins/cpu/xnn/xnn_conv.h): the rule for which convolutions take
// it, the result against a double reference over shapes of one and several blocks of images (stride,
// padding, dilation, groups, bias), no heap allocation in a run (everything in the arena prepare sized, for
// one image, whatever the call's images), and an arena too small reported as an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/scoped_env.h"
#include "xnn_conv.h"

namespace {

using fresco::sdk::ConvShape;

// n images h x w x c, k outputs of r x s x c/g, stride st, padding pd, dilation dl, g groups.
ConvShape shape(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t r, int64_t st, int64_t pd,
                int64_t dl = 1, int64_t g = 1) {
  ConvShape s{};
  s.n = n, s.h = h, s.w = w, s.c = c, s.k = k, s.r = r, s.s = r, s.g = g, s.cg = c / g, s.kg = k / g;
  s.sh = s.sw = st, s.ph = s.pw = pd, s.dh = s.dw = dl;
  s.p = (h + 2 * pd - dl * (r - 1) - 1) / st + 1;
  s.q = (w + 2 * pd - dl * (r - 1) - 1) / st + 1;
  return s;
}

// y[n, p, q, k] in double: NHWC x, weights [K, R, S, C/g].
std::vector<double> reference(const ConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b) {
  std::vector<double> y(static_cast<size_t>(s.n * s.p * s.q * s.k));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t p = 0; p < s.p; ++p)
      for (int64_t q = 0; q < s.q; ++q)
        for (int64_t k = 0; k < s.k; ++k) {
          const int64_t g = k / s.kg;
          double acc = b.empty() ? 0.0 : b[static_cast<size_t>(k)];
          for (int64_t r = 0; r < s.r; ++r)
            for (int64_t t = 0; t < s.s; ++t) {
              const int64_t hi = p * s.sh - s.ph + r * s.dh, wi = q * s.sw - s.pw + t * s.dw;
              if (hi < 0 || hi >= s.h || wi < 0 || wi >= s.w) continue;
              for (int64_t c = 0; c < s.cg; ++c)
                acc += static_cast<double>(
                           x[static_cast<size_t>(((n * s.h + hi) * s.w + wi) * s.c + g * s.cg + c)]) *
                       w[static_cast<size_t>(((k * s.r + r) * s.s + t) * s.cg + c)];
            }
          y[static_cast<size_t>(((n * s.p + p) * s.q + q) * s.k + k)] = acc;
        }
  return y;
}

struct Aligned {
  std::unique_ptr<void, void (*)(void*)> p{nullptr, std::free};
  explicit Aligned(uint64_t bytes) : p(std::aligned_alloc(64, bytes), std::free) {
    std::memset(p.get(), 0xAB, bytes);  // garbage: nothing may expect zeros
  }
};

}  // namespace

TEST(XnnConv, TakesConvolutionsOfFewTapsPerGroup) {
  EXPECT_TRUE(fresco::cpu::xnn_conv_wanted(shape(8, 32, 32, 3, 64, 3, 1, 1)));        // 27 taps: a stem
  EXPECT_TRUE(fresco::cpu::xnn_conv_wanted(shape(8, 28, 28, 1, 16, 5, 2, 2)));        // 25
  EXPECT_TRUE(fresco::cpu::xnn_conv_wanted(shape(8, 8, 8, 64, 64, 3, 1, 1, 1, 64)));  // depthwise: 9 a group
  EXPECT_FALSE(fresco::cpu::xnn_conv_wanted(shape(8, 32, 32, 4, 64, 3, 1, 1)));       // 36
  EXPECT_FALSE(fresco::cpu::xnn_conv_wanted(shape(8, 32, 32, 64, 64, 3, 1, 1)));      // the packed GEMM's
  const fresco::test::ScopedEnv off("FRESCO_CPU_XNNPACK", "0");
  EXPECT_FALSE(fresco::cpu::xnn_conv_wanted(shape(8, 32, 32, 3, 64, 3, 1, 1)));
}

TEST(XnnConv, MatchesTheReferenceWithNoHeapAllocationInARun) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const ConvShape& s :
       {shape(5, 7, 9, 3, 16, 3, 1, 1), shape(40, 6, 6, 3, 64, 3, 1, 1), shape(33, 11, 10, 1, 32, 5, 2, 2),
        shape(3, 9, 9, 2, 8, 3, 1, 2, 2), shape(4, 8, 8, 3, 6, 3, 2, 1, 1, 3)})
    for (bool bias : {false, true}) {
      SCOPED_TRACE("n " + std::to_string(s.n) + " c " + std::to_string(s.c) + " k " + std::to_string(s.k) +
                   " r " + std::to_string(s.r) + " stride " + std::to_string(s.sh) + " groups " +
                   std::to_string(s.g) + (bias ? " bias" : ""));
      std::vector<float> x(static_cast<size_t>(s.n * s.h * s.w * s.c)),
          w(static_cast<size_t>(s.k * s.r * s.s * s.cg)), b(bias ? static_cast<size_t>(s.k) : 0),
          y(static_cast<size_t>(s.n * s.p * s.q * s.k), NAN);
      for (float& v : x) v = u(rng);
      for (float& v : w) v = u(rng);
      for (float& v : b) v = u(rng);
      ConvShape one = s;  // the arena of a call of one image serves a call of any number
      one.n = 1;
      const uint64_t arena = fresco::cpu::xnn_conv_arena_bytes(one, bias, 2);
      ASSERT_GT(arena, 0u);
      EXPECT_EQ(arena % 64, 0u);
      Aligned ws(arena);
      const uint64_t heap = fresco::cpu::xnn_conv_heap_allocations();
      for (int run = 0; run < 2; ++run)
        fresco::cpu::xnn_conv_forward(s, x.data(), w.data(), bias ? b.data() : nullptr, y.data(), ws.p.get(),
                                      arena);
      EXPECT_EQ(fresco::cpu::xnn_conv_heap_allocations(), heap);
      const std::vector<double> want = reference(s, x, w, b);
      double worst = 0.0;
      for (size_t i = 0; i < y.size(); ++i)
        worst = std::max(worst, std::fabs(y[i] - want[i]) / (1.0 + std::fabs(want[i])));
      EXPECT_LT(worst, 1e-5);
    }
}

TEST(XnnConv, AnArenaTooSmallIsAnError) {
  const ConvShape s = shape(4, 16, 16, 3, 32, 3, 1, 1);
  const uint64_t arena = fresco::cpu::xnn_conv_arena_bytes(s, false, 2);
  ASSERT_GT(arena, 256u);
  std::vector<float> x(static_cast<size_t>(s.n * s.h * s.w * s.c)), w(static_cast<size_t>(s.k * 27)),
      y(static_cast<size_t>(s.n * s.p * s.q * s.k));
  Aligned ws(arena);
  try {
    fresco::cpu::xnn_conv_forward(s, x.data(), w.data(), nullptr, y.data(), ws.p.get(), 256);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("too small"), std::string::npos) << e.what();
  }
}
