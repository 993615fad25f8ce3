// CUDA conv2d backward, direct and deterministic (one thread per result element, fixed summation order):
// dw[k,r,s,c] = sum over (n,p,q) of dy * x (double accumulation), db[k] = sum of dy (double), and with
// need_dx dx[n,h,w,c] = sum over the (k, r, s) whose window covers (h, w) of dy * w. Written, not
// accumulated. Correctness-first like conv2d.cu; the cuDNN path is still to be written. Test:
// test_cuda_ops.cpp.
#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"

namespace fresco::cuda {

namespace {
__global__ void conv_dw_kernel(const float* dy, const float* x, float* dw, sdk::ConvShape g) {
  FR_CUDA_GRID_LOOP(t, g.k * g.r * g.s * g.cg) {
    const int64_t c = t % g.cg, s = (t / g.cg) % g.s, r = (t / (g.cg * g.s)) % g.r,
                  k = t / (g.cg * g.s * g.r);
    const int64_t ch = (k / g.kg) * g.cg + c;
    double acc = 0.0;
    for (int64_t img = 0; img < g.n; ++img)
      for (int64_t i = 0; i < g.p; ++i) {
        const int64_t yy = i * g.sh - g.ph + r * g.dh;
        if (yy < 0 || yy >= g.h) continue;
        for (int64_t j = 0; j < g.q; ++j) {
          const int64_t xx = j * g.sw - g.pw + s * g.dw;
          if (xx < 0 || xx >= g.w) continue;
          acc += static_cast<double>(dy[((img * g.p + i) * g.q + j) * g.k + k]) *
                 x[((img * g.h + yy) * g.w + xx) * g.c + ch];
        }
      }
    dw[t] = static_cast<float>(acc);
  }
}

__global__ void conv_db_kernel(const float* dy, float* db, sdk::ConvShape g) {
  FR_CUDA_GRID_LOOP(k, g.k) {
    double acc = 0.0;
    for (int64_t o = 0; o < g.n * g.p * g.q; ++o) acc += dy[o * g.k + k];
    db[k] = static_cast<float>(acc);
  }
}

__global__ void conv_dx_kernel(const float* dy, const float* w, float* dx, sdk::ConvShape g) {
  FR_CUDA_GRID_LOOP(t, g.n * g.h * g.w * g.c) {
    const int64_t ch = t % g.c, xx = (t / g.c) % g.w, yy = (t / (g.c * g.w)) % g.h,
                  img = t / (g.c * g.w * g.h);
    const int64_t gi = ch / g.cg, c = ch % g.cg;
    float acc = 0.0f;
    for (int64_t r = 0; r < g.r; ++r) {
      const int64_t num_i = yy + g.ph - r * g.dh;
      if (num_i < 0 || num_i % g.sh) continue;
      const int64_t i = num_i / g.sh;
      if (i >= g.p) continue;
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t num_j = xx + g.pw - s * g.dw;
        if (num_j < 0 || num_j % g.sw) continue;
        const int64_t j = num_j / g.sw;
        if (j >= g.q) continue;
        const float* dyp = dy + ((img * g.p + i) * g.q + j) * g.k;
        for (int64_t k = gi * g.kg; k < (gi + 1) * g.kg; ++k)
          acc += dyp[k] * w[((k * g.r + r) * g.s + s) * g.cg + c];
      }
    }
    dx[t] = acc;
  }
}
}  // namespace

FR_CUDA_KERNEL_RUN(conv2d_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const uint32_t n_out = 1u + (p.conv.has_bias ? 1u : 0u) + (p.need_dx ? 1u : 0u);
    sdk::expect_arity(call, 3, n_out, 0, 0, "conv2d_backward");
    const FrTensor &dy = call->in[0], &x = call->in[1], &w = call->in[2];
    const sdk::ConvShape g = sdk::conv_shape("conv2d_backward", p.conv, x, w, dy);
    uint32_t o = 0;
    FR_PLUGIN_CHECK(
        sdk::numel(call->out[0]) == sdk::numel(w), FR_ERR_INVALID_ARGUMENT,
        "conv2d_backward: dw " + sdk::shape_str(call->out[0]) + " differs from w " + sdk::shape_str(w));
    const int sm = ctx_of(ctx)->sm_count;
    cudaStream_t st = stream_of(call);
    conv_dw_kernel<<<grid_for(sdk::numel(w), 256, sm), 256, 0, st>>>(
        sdk::data<float>(dy), sdk::data<float>(x), sdk::data<float>(call->out[o++]), g);
    FR_CUDA_LAUNCH_CHECK();
    if (p.conv.has_bias) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o]) == g.k, FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: db must have K elements");
      conv_db_kernel<<<grid_for(g.k, 256, sm), 256, 0, st>>>(sdk::data<float>(dy),
                                                             sdk::data<float>(call->out[o++]), g);
      FR_CUDA_LAUNCH_CHECK();
    }
    if (p.need_dx) {
      FR_PLUGIN_CHECK(sdk::numel(call->out[o]) == sdk::numel(x), FR_ERR_INVALID_ARGUMENT,
                      "conv2d_backward: dx must have the shape of x");
      conv_dx_kernel<<<grid_for(sdk::numel(x), 256, sm), 256, 0, st>>>(
          sdk::data<float>(dy), sdk::data<float>(w), sdk::data<float>(call->out[o]), g);
      FR_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace fresco::cuda
