// CUDA conv2d forward (NHWC, weights [K, R, S, C/g], optional bias), direct: one thread per output element
// sums its receptive field in a fixed order, so results are deterministic. This is the correctness-first
// kernel (any stride, padding, dilation, groups); it is far from cuDNN's speed and the cuDNN path of the CNN
// issue is still to be written. Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"

namespace fresco::cuda {

namespace {
__global__ void conv_forward_kernel(const float* x, const float* w, const float* b, float* y,
                                    sdk::ConvShape g) {
  const int64_t total = g.n * g.p * g.q * g.k;
  FR_CUDA_GRID_LOOP(o, total) {
    const int64_t k = o % g.k, j = (o / g.k) % g.q, i = (o / (g.k * g.q)) % g.p, img = o / (g.k * g.q * g.p);
    const int64_t c0 = (k / g.kg) * g.cg;
    float acc = b ? b[k] : 0.0f;
    for (int64_t r = 0; r < g.r; ++r) {
      const int64_t yy = i * g.sh - g.ph + r * g.dh;
      if (yy < 0 || yy >= g.h) continue;
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t xx = j * g.sw - g.pw + s * g.dw;
        if (xx < 0 || xx >= g.w) continue;
        const float* xp = x + ((img * g.h + yy) * g.w + xx) * g.c + c0;
        const float* wp = w + ((k * g.r + r) * g.s + s) * g.cg;
        for (int64_t c = 0; c < g.cg; ++c) acc += xp[c] * wp[c];
      }
    }
    y[o] = acc;
  }
}
}  // namespace

FR_CUDA_KERNEL_RUN(conv2d) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvParams>(call);
    sdk::expect_arity(call, p.has_bias ? 3 : 2, 1, 0, 0, "conv2d");
    const sdk::ConvShape g = sdk::conv_shape("conv2d", p, call->in[0], call->in[1], call->out[0]);
    if (p.has_bias)
      FR_PLUGIN_CHECK(sdk::numel(call->in[2]) == g.k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d: bias must have K elements");
    conv_forward_kernel<<<grid_for(g.n * g.p * g.q * g.k, 256, ctx_of(ctx)->sm_count), 256, 0,
                          stream_of(call)>>>(sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]),
                                             p.has_bias ? sdk::data<float>(call->in[2]) : nullptr,
                                             sdk::data<float>(call->out[0]), g);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
