// CPU conv2d forward (NHWC, weights [K, R, S, C/g]): im2col of a block of images into the workspace, then one
// packed GEMM per group, y_g[m, K/g] = col_g[m, R*S*C/g] w_g^T (+ bias written first); 1x1/stride-1/no-pad
// convolutions skip im2col and use x in place. Invariants: never allocates; the image block size depends only
// on the shapes and every output element is produced by one GEMM dot product, so results are bitwise equal
// for any thread count. Test: tests/plugins/cpu/test_conv2d.cpp (double reference, many geometries).
#include <algorithm>
#include <cstring>
#include <string>

#include "cpu_common.h"
#include "fresco/conv_geometry.hpp"
#include "gemm.h"

namespace fresco::cpu {

namespace {

// Floats of im2col scratch aimed at per block of images (the block holds at least one image).
constexpr int64_t kColTargetFloats = int64_t{1} << 20;

using sdk::shape_str;

// The checked geometry of one conv2d call (forward tensor order: x, w, [b]; y).
struct ConvGeom : sdk::ConvShape {
  bool direct;          // 1x1, stride 1, no padding: x is the column matrix itself
  int64_t nb;           // images per im2col block
  int64_t rsc;          // R*S*C: one column-buffer row (all groups, group-major)
  int64_t rscg;         // R*S*C/g: the GEMM depth of one group
  uint64_t col_bytes;   // im2col buffer (rounded to 64 bytes), 0 when direct
  uint64_t gemm_bytes;  // GEMM packing scratch, after the column buffer
};

// y is the output (or, backward, dy); `op` names the op in error messages.
ConvGeom conv_geometry(const char* op, const FrConvParams& p, const FrTensor& x, const FrTensor& w,
                       const FrTensor& y) {
  ConvGeom gm{};
  static_cast<sdk::ConvShape&>(gm) = sdk::conv_shape(op, p, x, w, y);
  gm.rsc = gm.r * gm.s * gm.c;
  gm.rscg = gm.r * gm.s * gm.cg;
  gm.direct = gm.r == 1 && gm.s == 1 && gm.sh == 1 && gm.sw == 1 && gm.ph == 0 && gm.pw == 0;
  const int64_t per_image = gm.p * gm.q * gm.rsc;
  gm.nb = gm.direct ? gm.n : std::clamp<int64_t>(kColTargetFloats / per_image, 1, gm.n);
  gm.col_bytes = gm.direct ? 0 : (static_cast<uint64_t>(gm.nb * per_image) * sizeof(float) + 63) / 64 * 64;
  return gm;
}

// col[i, (g, r, s, c)] for the rows i of images [n0, n0 + nb): the receptive field of output pixel i, zero
// where it falls into the padding. Rows are independent, so the parallel partition does not matter.
void im2col(const ConvGeom& gm, const float* x, int64_t n0, int64_t nb, float* col) {
  const int64_t pq = gm.p * gm.q;
  parallel_chunks(nb * pq, 32, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = n0 + i / pq, pp = (i % pq) / gm.q, qq = i % gm.q;
      float* row = col + i * gm.rsc;
      for (int64_t r = 0; r < gm.r; ++r) {
        const int64_t hh = pp * gm.sh - gm.ph + r * gm.dh;
        for (int64_t s = 0; s < gm.s; ++s) {
          const int64_t ww = qq * gm.sw - gm.pw + s * gm.dw;
          const bool inside = hh >= 0 && hh < gm.h && ww >= 0 && ww < gm.w;
          const float* src = x + ((n * gm.h + hh) * gm.w + ww) * gm.c;
          for (int64_t g = 0; g < gm.g; ++g) {
            float* dst = row + g * gm.rscg + (r * gm.s + s) * gm.cg;
            if (inside)
              std::memcpy(dst, src + g * gm.cg, static_cast<size_t>(gm.cg) * sizeof(float));
            else
              std::memset(dst, 0, static_cast<size_t>(gm.cg) * sizeof(float));
          }
        }
      }
    }
  });
}

ConvGeom checked_geometry(const FrCall* call, const FrConvParams& p) {
  sdk::expect_arity(call, p.has_bias ? 3 : 2, 1, 0, 0, "conv2d");
  for (uint32_t i = 0; i < (p.has_bias ? 3u : 2u); ++i) expect_dtype(call->in[i], FR_F32, "conv2d input");
  expect_dtype(call->out[0], FR_F32, "conv2d output");
  ConvGeom gm = conv_geometry("conv2d", p, call->in[0], call->in[1], call->out[0]);
  // Full blocks of nb images and a shorter last block: the GEMM scratch is sized for both.
  gm.gemm_bytes = gemm_workspace_bytes(gm.nb * gm.p * gm.q, gm.kg, gm.rscg, max_threads());
  if (gm.n % gm.nb)
    gm.gemm_bytes = std::max(
        gm.gemm_bytes, gemm_workspace_bytes((gm.n % gm.nb) * gm.p * gm.q, gm.kg, gm.rscg, max_threads()));
  if (p.has_bias)
    FR_PLUGIN_CHECK(sdk::numel(call->in[2]) == gm.k, FR_ERR_INVALID_ARGUMENT,
                    "conv2d: bias has " + std::to_string(sdk::numel(call->in[2])) + " elements, K is " +
                        std::to_string(gm.k));
  return gm;
}

}  // namespace

FR_CPU_KERNEL_PREPARE(conv2d) {
  return sdk::guard([&] {
    *state = nullptr;
    const auto& p = sdk::params<FrConvParams>(call);
    const ConvGeom gm = checked_geometry(call, p);
    *workspace_bytes = gm.col_bytes + gm.gemm_bytes;
  });
}

FR_CPU_KERNEL_RUN(conv2d) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvParams>(call);
    const ConvGeom gm = checked_geometry(call, p);
    FR_PLUGIN_CHECK(call->workspace_bytes >= gm.col_bytes + gm.gemm_bytes, FR_ERR_INVALID_ARGUMENT,
                    "conv2d: workspace too small");
    const float* x = sdk::data<const float>(call->in[0]);
    const float* w = sdk::data<const float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    float* col = static_cast<float*>(call->workspace);
    void* gemm_ws = static_cast<char*>(call->workspace) + gm.col_bytes;
    const int64_t pq = gm.p * gm.q;
    float beta = 0.0f;
    if (p.has_bias) {
      const float* b = sdk::data<const float>(call->in[2]);
      parallel_chunks(gm.n * pq, 64, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          std::memcpy(y + i * gm.k, b, static_cast<size_t>(gm.k) * sizeof(float));
      });
      beta = 1.0f;
    }
    for (int64_t n0 = 0; n0 < gm.n; n0 += gm.nb) {
      const int64_t nb = std::min(gm.nb, gm.n - n0);
      const float* a = x + n0 * gm.h * gm.w * gm.c;  // direct: x rows are the column rows
      int64_t lda = gm.c;
      if (!gm.direct) {
        im2col(gm, x, n0, nb, col);
        a = col;
        lda = gm.rsc;
      }
      for (int64_t g = 0; g < gm.g; ++g) {
        GemmArgs ga;  // y_g[m, Kg] = col_g[m, RSCg] w_g[Kg, RSCg]^T
        ga.trans_b = true;
        ga.m = nb * pq;
        ga.n = gm.kg;
        ga.k = gm.rscg;
        ga.a = a + g * (gm.direct ? gm.cg : gm.rscg);
        ga.lda = lda;
        ga.b = w + g * gm.kg * gm.rscg;
        ga.ldb = gm.rscg;
        ga.beta = beta;
        ga.c = y + n0 * pq * gm.k + g * gm.kg;
        ga.ldc = gm.k;
        sgemm(ga, gemm_ws, gm.gemm_bytes);
      }
    }
  });
}

}  // namespace fresco::cpu
