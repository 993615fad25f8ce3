// CPU 2-D pooling on NHWC f32 maps, forward and backward: max pool (padding never wins; ties go to the first
// maximum in row-major window order; NaN propagates as in PyTorch), average pool (count_include_pad: divisor
// kh*kw) and global average pool. Every output element is computed by one task in a fixed order, so results
// are deterministic; max_pool2d_backward scatters per (image, channel block) task, avg backward gathers.
// Test: test_pool.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu_common.h"
#include "fresco/pool_geometry.hpp"

namespace fresco::cpu {

namespace {

using sdk::pool_geom;
using sdk::PoolGeom;

void same_shape(const FrTensor& a, const FrTensor& b, const std::string& what) {
  FR_PLUGIN_CHECK(a.ndim == b.ndim && std::equal(a.dims, a.dims + 4, b.dims), FR_ERR_INVALID_ARGUMENT,
                  what + ": shapes differ");
}

constexpr int64_t kChanBlock = 16;

// Max-pool argmax of one window for channels [c0, c0 + nc): offsets (into the image) of the first maxima.
void window_argmax(const float* img, const PoolGeom& g, int64_t i, int64_t j, int64_t c0, int64_t nc,
                   int64_t* arg) {
  float best[kChanBlock];
  bool first = true;
  const int64_t y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
  for (int64_t yy = std::max<int64_t>(y0, 0); yy < std::min(y0 + g.kh, g.h); ++yy)
    for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x0 + g.kw, g.w); ++xx) {
      const int64_t off = (yy * g.w + xx) * g.c + c0;
      const float* v = img + off;
      for (int64_t k = 0; k < nc; ++k)
        if (first || v[k] > best[k] || std::isnan(v[k])) best[k] = v[k], arg[k] = off + k;
      first = false;
    }
}

}  // namespace

FR_CPU_KERNEL_RUN(max_pool2d) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "max_pool2d");
    const PoolGeom g = pool_geom(sdk::params<FrPoolParams>(call), call->in[0], call->out[0], "max_pool2d");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    parallel_chunks(g.n * g.p, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.q * g.c, 1)),
                    [&](int64_t a, int64_t b) {
                      for (int64_t r = a; r < b; ++r) {
                        const int64_t img = r / g.p, i = r % g.p;
                        const float* xi = x + img * g.h * g.w * g.c;
                        for (int64_t j = 0; j < g.q; ++j) {
                          float* yo = y + (r * g.q + j) * g.c;
                          const int64_t y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
                          bool first = true;
                          for (int64_t yy = std::max<int64_t>(y0, 0); yy < std::min(y0 + g.kh, g.h); ++yy)
                            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x0 + g.kw, g.w); ++xx) {
                              const float* v = xi + (yy * g.w + xx) * g.c;
                              if (first) {
                                std::copy(v, v + g.c, yo);
                                first = false;
                                continue;
                              }
                              for (int64_t k = 0; k < g.c; ++k)
                                if (v[k] > yo[k] || std::isnan(v[k])) yo[k] = v[k];
                            }
                        }
                      }
                    });
  });
}

FR_CPU_KERNEL_RUN(max_pool2d_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "max_pool2d_backward");
    const PoolGeom g =
        pool_geom(sdk::params<FrPoolParams>(call), call->in[1], call->in[0], "max_pool2d_backward");
    same_shape(call->in[1], call->out[0], "max_pool2d_backward: x and dx");
    same_shape(call->in[0], call->in[2], "max_pool2d_backward: dy and y");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* x = sdk::data<float>(call->in[1]);
    float* dx = sdk::data<float>(call->out[0]);
    FR_PLUGIN_CHECK(dx != dy, FR_ERR_INVALID_ARGUMENT, "max_pool2d_backward: dx must not alias dy");
    const int64_t blocks = (g.c + kChanBlock - 1) / kChanBlock;
    const int64_t plane = g.h * g.w * g.c;
    // One task per (image, channel block): it alone writes those dx elements, in output order.
    parallel_chunks(g.n * blocks, 1, [&](int64_t a, int64_t b) {
      for (int64_t t = a; t < b; ++t) {
        const int64_t img = t / blocks, c0 = (t % blocks) * kChanBlock;
        const int64_t nc = std::min(kChanBlock, g.c - c0);
        const float* xi = x + img * plane;
        float* dxi = dx + img * plane;
        for (int64_t k = 0; k < g.h * g.w; ++k) std::fill(dxi + k * g.c + c0, dxi + k * g.c + c0 + nc, 0.0f);
        int64_t arg[kChanBlock];
        for (int64_t i = 0; i < g.p; ++i)
          for (int64_t j = 0; j < g.q; ++j) {
            window_argmax(xi, g, i, j, c0, nc, arg);
            const float* d = dy + ((img * g.p + i) * g.q + j) * g.c + c0;
            for (int64_t k = 0; k < nc; ++k) dxi[arg[k]] += d[k];
          }
      }
    });
  });
}

FR_CPU_KERNEL_RUN(avg_pool2d) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "avg_pool2d");
    const PoolGeom g = pool_geom(sdk::params<FrPoolParams>(call), call->in[0], call->out[0], "avg_pool2d");
    const float* x = sdk::data<float>(call->in[0]);
    float* y = sdk::data<float>(call->out[0]);
    const float inv = 1.0f / static_cast<float>(g.kh * g.kw);
    parallel_chunks(g.n * g.p, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.q * g.c, 1)),
                    [&](int64_t a, int64_t b) {
                      for (int64_t r = a; r < b; ++r) {
                        const int64_t img = r / g.p, i = r % g.p;
                        const float* xi = x + img * g.h * g.w * g.c;
                        for (int64_t j = 0; j < g.q; ++j) {
                          float* yo = y + (r * g.q + j) * g.c;
                          std::fill(yo, yo + g.c, 0.0f);
                          const int64_t y0 = i * g.sh - g.ph, x0 = j * g.sw - g.pw;
                          for (int64_t yy = std::max<int64_t>(y0, 0); yy < std::min(y0 + g.kh, g.h); ++yy)
                            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x0 + g.kw, g.w); ++xx) {
                              const float* v = xi + (yy * g.w + xx) * g.c;
                              for (int64_t k = 0; k < g.c; ++k) yo[k] += v[k];
                            }
                          for (int64_t k = 0; k < g.c; ++k) yo[k] *= inv;
                        }
                      }
                    });
  });
}

FR_CPU_KERNEL_RUN(avg_pool2d_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "avg_pool2d_backward");
    const PoolGeom g =
        pool_geom(sdk::params<FrPoolParams>(call), call->out[0], call->in[0], "avg_pool2d_backward");
    const float* dy = sdk::data<float>(call->in[0]);
    float* dx = sdk::data<float>(call->out[0]);
    FR_PLUGIN_CHECK(dx != dy, FR_ERR_INVALID_ARGUMENT, "avg_pool2d_backward: dx must not alias dy");
    const float inv = 1.0f / static_cast<float>(g.kh * g.kw);
    // Gather: input row yy is covered by output rows i with i*sh - ph <= yy < i*sh - ph + kh.
    parallel_chunks(g.n * g.h, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.w * g.c, 1)),
                    [&](int64_t a, int64_t b) {
                      for (int64_t r = a; r < b; ++r) {
                        const int64_t img = r / g.h, yy = r % g.h;
                        const int64_t i0 = sdk::first_covering(yy, g.ph, g.kh, g.sh);
                        const int64_t i1 = std::min(g.p - 1, (yy + g.ph) / g.sh);
                        for (int64_t xx = 0; xx < g.w; ++xx) {
                          float* d = dx + (r * g.w + xx) * g.c;
                          std::fill(d, d + g.c, 0.0f);
                          const int64_t j0 = sdk::first_covering(xx, g.pw, g.kw, g.sw);
                          const int64_t j1 = std::min(g.q - 1, (xx + g.pw) / g.sw);
                          for (int64_t i = i0; i <= i1; ++i)
                            for (int64_t j = j0; j <= j1; ++j) {
                              const float* s = dy + ((img * g.p + i) * g.q + j) * g.c;
                              for (int64_t k = 0; k < g.c; ++k) d[k] += s[k];
                            }
                          for (int64_t k = 0; k < g.c; ++k) d[k] *= inv;
                        }
                      }
                    });
  });
}

FR_CPU_KERNEL_RUN(global_avg_pool) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "global_avg_pool");
    const FrTensor& xt = call->in[0];
    const FrTensor& yt = call->out[0];
    const sdk::GapShape gs = sdk::gap_shape(xt, yt, "global_avg_pool", "x", "y");
    const int64_t n = gs.n, hw = gs.hw, c = gs.c;
    const float* x = sdk::data<float>(xt);
    float* y = sdk::data<float>(yt);
    const double inv = 1.0 / static_cast<double>(hw);
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (c + kBlock - 1) / kBlock;
    parallel_chunks(n * blocks, 1, [&](int64_t a, int64_t b) {
      double acc[kBlock];
      for (int64_t t = a; t < b; ++t) {
        const int64_t img = t / blocks, c0 = (t % blocks) * kBlock, nc = std::min(kBlock, c - c0);
        std::fill(acc, acc + nc, 0.0);
        const float* xi = x + img * hw * c + c0;
        for (int64_t s = 0; s < hw; ++s)
          for (int64_t k = 0; k < nc; ++k) acc[k] += xi[s * c + k];
        for (int64_t k = 0; k < nc; ++k) y[img * c + c0 + k] = static_cast<float>(acc[k] * inv);
      }
    });
  });
}

FR_CPU_KERNEL_RUN(global_avg_pool_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "global_avg_pool_backward");
    const FrTensor& dyt = call->in[0];
    const FrTensor& dxt = call->out[0];
    const sdk::GapShape gs = sdk::gap_shape(dxt, dyt, "global_avg_pool_backward", "dx", "dy");
    const int64_t n = gs.n, hw = gs.hw, c = gs.c;
    const float* dy = sdk::data<float>(dyt);
    float* dx = sdk::data<float>(dxt);
    FR_PLUGIN_CHECK(dx != dy || hw == 1, FR_ERR_INVALID_ARGUMENT,
                    "global_avg_pool_backward: dx must not alias dy");
    const float inv = static_cast<float>(1.0 / static_cast<double>(hw));
    parallel_chunks(n * hw, std::max<int64_t>(1, 16384 / c), [&](int64_t a, int64_t b) {
      for (int64_t r = a; r < b; ++r) {
        const float* d = dy + (r / hw) * c;
        float* o = dx + r * c;
        for (int64_t k = 0; k < c; ++k) o[k] = d[k] * inv;
      }
    });
  });
}

}  // namespace fresco::cpu
