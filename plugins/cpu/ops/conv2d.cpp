// CPU conv2d forward (NHWC, weights [K, R, S, C/g]): im2col of a block of images into the workspace, then one
// packed GEMM per group, y_g[m, K/g] = col_g[m, R*S*C/g] w_g^T (+ bias written first); 1x1/stride-1/no-pad
// convolutions skip im2col and use x in place. Invariants: never allocates; the image block size depends only
// on the shapes and every output element is produced by one GEMM dot product, so results are bitwise equal
// for any thread count. With a second output, the per-channel sums of y and y^2 (ops.h) in double per fixed
// row chunk, combined in chunk order and rounded to f32 once. With a batchnorm prologue (ops.h) x is first
// transformed into the applied-map output, which the convolution then reads (ops/conv_prologue.h). A
// convolution of at most 32 taps per group (a stem) runs on XNNPACK instead (xnn/xnn_conv.h: chosen at
// prepare, its allocations in the workspace). Test: tests/plugins/cpu/test_conv2d.cpp (double reference,
// many geometries), tests/plugins/cpu/test_xnn_conv.cpp.
#include <algorithm>
#include <cstring>
#include <string>

#include "cpu_common.h"
#include "fresco/conv_stats_checks.hpp"
#include "gemm.h"
#include "ops/batchnorm_chunks.h"
#include "ops/conv_im2col.h"
#include "ops/conv_prologue.h"
#include "xnn_conv.h"

namespace fresco::cpu {

namespace {

// Where the sums' partials start in the workspace: after im2col and the GEMM scratch, 64-byte aligned.
uint64_t sums_offset(const ConvGeom& gm) {
  return (gm.col_bytes + gm.gemm_bytes + 63) / 64 * 64;
}

// Bytes of the double partial sums of the sums output (none without one): 2K per row chunk.
uint64_t sums_bytes(const FrCall* call, const ConvGeom& gm) {
  if (!sdk::has_conv_sums(call)) return 0;
  const int64_t rows = gm.n * gm.p * gm.q, grain = bn_grain_rows(rows, gm.k);
  return static_cast<uint64_t>((rows + grain - 1) / grain * 2 * gm.k) * sizeof(double);
}

// The XNNPACK path's state (prepare's choice): its arena at the workspace's start, the sums' partials after.
struct XnnState {
  uint64_t arena_bytes;
};

// The workspace of the packed GEMM's path, or of XNNPACK's with its state `xs`.
uint64_t workspace_of(const FrCall* call, const ConvGeom& gm, const XnnState* xs = nullptr) {
  const uint64_t sb = sums_bytes(call, gm);
  if (xs) return xs->arena_bytes + sb;
  return sb ? sums_offset(gm) + sb : gm.col_bytes + gm.gemm_bytes;
}

// sums[k] = sum of y[.., k], sums[K + k] = sum of its squares: double per chunk, chunks added in order.
void channel_sums(const float* y, int64_t rows, int64_t k, double* part, float* sums) {
  const int64_t grain = bn_grain_rows(rows, k), chunks = (rows + grain - 1) / grain;
  parallel_chunks(rows, grain, [&](int64_t a, int64_t b) {
    double* acc = part + (a / grain) * 2 * k;
    std::fill(acc, acc + 2 * k, 0.0);
    for (int64_t i = a; i < b; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const double v = y[i * k + j];
        acc[j] += v;
        acc[k + j] += v * v;
      }
  });
  for (int64_t j = 0; j < 2 * k; ++j) {
    double t = 0.0;
    for (int64_t c = 0; c < chunks; ++c) t += part[c * 2 * k + j];
    sums[j] = static_cast<float>(t);
  }
}

ConvGeom checked_geometry(const FrCall* call, const FrConvParams& p) {
  sdk::expect_arity(call, p.has_bias ? 3 : 2, 1, 0, 0, "conv2d");
  sdk::conv_prologue(call);  // checks only
  for (uint32_t i = 0; i < (p.has_bias ? 3u : 2u); ++i) expect_dtype(call->in[i], FR_F32, "conv2d input");
  expect_dtype(call->out[0], FR_F32, "conv2d output");
  ConvGeom gm = conv_geometry("conv2d", p, call->in[0], call->in[1], call->out[0]);
  sdk::conv_sums_output(call, gm.k);
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
    *workspace_bytes = workspace_of(call, gm);
    if (!xnn_conv_wanted(gm)) return;
    const uint64_t arena = xnn_conv_arena_bytes(gm, p.has_bias != 0, max_threads());
    if (arena == 0) return;  // XNNPACK not usable here: the packed GEMM
    auto* xs = new XnnState{arena};
    *state = xs;
    *workspace_bytes = workspace_of(call, gm, xs);
  });
}

void conv2d_destroy(void*, void* state) noexcept {
  delete static_cast<XnnState*>(state);
}

FR_CPU_KERNEL_RUN(conv2d) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvParams>(call);
    const ConvGeom gm = checked_geometry(call, p);
    const auto* xs = static_cast<const XnnState*>(call->state);  // prepare's choice: XNNPACK
    FR_PLUGIN_CHECK(call->workspace_bytes >= workspace_of(call, gm, xs), FR_ERR_INVALID_ARGUMENT,
                    "conv2d: workspace too small");
    const float* x = sdk::data<const float>(call->in[0]);
    void* applied = nullptr;
    const void* residual = nullptr;
    const sdk::BnPrologue bn = sdk::conv_prologue(call, &applied, &residual);
    if (bn.gamma) {
      apply_conv_prologue(x, static_cast<float*>(applied), gm.n * gm.h * gm.w, gm.c, bn,
                          static_cast<const float*>(residual));
      x = static_cast<const float*>(applied);
    }
    const float* w = sdk::data<const float>(call->in[1]);
    float* y = sdk::data<float>(call->out[0]);
    if (xs) {
      xnn_conv_forward(gm, x, w, p.has_bias ? sdk::data<const float>(call->in[2]) : nullptr, y,
                       call->workspace, xs->arena_bytes);
      if (float* sums = sdk::conv_sums_output(call, gm.k))
        channel_sums(y, gm.n * gm.p * gm.q, gm.k,
                     reinterpret_cast<double*>(static_cast<char*>(call->workspace) + xs->arena_bytes), sums);
      return;
    }
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
    if (float* sums = sdk::conv_sums_output(call, gm.k))
      channel_sums(y, gm.n * pq, gm.k,
                   reinterpret_cast<double*>(static_cast<char*>(call->workspace) + sums_offset(gm)), sums);
  });
}

}  // namespace fresco::cpu
