// CPU conv2d backward (NHWC, weights [K, R, S, C/g]), per block of images: im2col(x) into the workspace, then
// per group dw_g += dy_g^T col_g (blocks summed in order), and, with need_dx, dcol_g = dy_g w_g into the same
// buffer followed by a gather col2im (each dx element sums its taps in (r, s) order); db = column sums of dy
// in row order. Part 1 computes only dx, part 2 only dw and db (ops.h); the arithmetic of each gradient is
// the same as in the whole call. Gradients are written, not accumulated; never allocates; bitwise equal for
// any thread count. A compact input gradient (ops.h: a strided 1x1 conv's dx at dy's positions) is the dcol
// GEMM's result itself, the values col2im would copy to those positions. The geometry helpers are a copy of
// conv2d.cpp's. With the batchnorm gradient epilogue (ops.h) dx is then masked by x > 0 and the batchnorm's
// gradient sums written from it (grad_sums.h, as the masking passes do). With the weight gradient's batchnorm
// prologue (ops.h) the call first writes the batchnorm's dx from its output gradient into the workspace and
// uses that as dy. Test: tests/plugins/cpu/test_conv2d.cpp (reference, FD),
// tests/plugins/cpu/test_conv_prologue.cpp (the epilogue and the prologue).
#include <algorithm>
#include <cstring>
#include <string>

#include "cpu_common.h"
#include "fresco/batchnorm_rules.h"
#include "fresco/compact_grad.hpp"
#include "fresco/conv_backward_parts.hpp"
#include "fresco/conv_prologue.hpp"
#include "gemm.h"
#include "ops/conv_im2col.h"
#include "ops/grad_sums.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

namespace {

// dx[n, h, w, :] for the images [n0, n0 + nb): the sum of the dcol entries of every output pixel whose
// receptive field holds (h, w), taps in (r, s) order; pixels outside every field get 0.
void col2im(const ConvGeom& gm, const float* dcol, int64_t n0, int64_t nb, float* dx) {
  const int64_t hw = gm.h * gm.w;
  parallel_chunks(nb * hw, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t nl = i / hw, hh = (i % hw) / gm.w, ww = i % gm.w;
      float* dst = dx + ((n0 + nl) * hw + hh * gm.w + ww) * gm.c;
      std::fill(dst, dst + gm.c, 0.0f);
      for (int64_t r = 0; r < gm.r; ++r) {
        const int64_t th = hh + gm.ph - r * gm.dh;
        if (th < 0 || th % gm.sh != 0 || th / gm.sh >= gm.p) continue;
        const int64_t pp = th / gm.sh;
        for (int64_t s = 0; s < gm.s; ++s) {
          const int64_t tw = ww + gm.pw - s * gm.dw;
          if (tw < 0 || tw % gm.sw != 0 || tw / gm.sw >= gm.q) continue;
          const float* row = dcol + ((nl * gm.p + pp) * gm.q + tw / gm.sw) * gm.rsc + (r * gm.s + s) * gm.cg;
          for (int64_t g = 0; g < gm.g; ++g) {
            const float* src = row + g * gm.rscg;
            float* d = dst + g * gm.cg;
            for (int64_t c = 0; c < gm.cg; ++c) d[c] += src[c];
          }
        }
      }
    }
  });
}

// Checks arity, dtypes and shapes of {dy, x, w} -> the part's outputs; returns the geometry with GEMM
// scratch.
ConvGeom checked_geometry(const FrCall* call, const FrConvBackwardParams& p) {
  const sdk::ConvBackwardOutputs o = sdk::conv_backward_outputs(p);
  sdk::check_conv_backward_operands(call, o);
  for (uint32_t i = 0; i < 3; ++i) expect_dtype(call->in[i], FR_F32, "conv2d_backward input");
  for (uint32_t i = 0; i < o.count; ++i) expect_dtype(call->out[i], FR_F32, "conv2d_backward output");
  const FrTensor &x = call->in[1], &w = call->in[2];
  ConvGeom gm = conv_geometry("conv2d_backward", p.conv, x, w, call->in[0]);
  if (o.dw >= 0)
    FR_PLUGIN_CHECK(
        sdk::numel(call->out[o.dw]) == sdk::numel(w), FR_ERR_INVALID_ARGUMENT,
        "conv2d_backward: dw " + sdk::shape_str(call->out[o.dw]) + " differs from w " + sdk::shape_str(w));
  if (o.db >= 0)
    FR_PLUGIN_CHECK(sdk::numel(call->out[o.db]) == gm.k, FR_ERR_INVALID_ARGUMENT,
                    "conv2d_backward: db has " + std::to_string(sdk::numel(call->out[o.db])) +
                        " elements, K is " + std::to_string(gm.k));
  // dx has x's size, or is compact (ops.h: checked there)
  if (sdk::conv_compact_dx(call, p, o))
    FR_PLUGIN_CHECK(!sdk::has_conv_grad_epilogue(call) && !sdk::has_conv_join_epilogue(call),
                    FR_ERR_INVALID_ARGUMENT, "conv2d_backward: a compact input gradient takes no epilogue");
  // The GEMMs run on full blocks of nb images and on a shorter last block; the packing scratch is not
  // monotonic in the block size (the k blocking changes), so size it for both.
  const int64_t last = gm.n % gm.nb;
  gm.gemm_bytes = 0;
  for (const int64_t images : {gm.nb, last}) {
    if (images == 0) continue;
    const int64_t m = gm.direct ? gm.n * gm.h * gm.w : images * gm.p * gm.q;
    if (o.dw >= 0)
      gm.gemm_bytes = std::max(gm.gemm_bytes, gemm_workspace_bytes(gm.kg, gm.rscg, m, max_threads()));
    if (o.dx >= 0)
      gm.gemm_bytes = std::max(gm.gemm_bytes, gemm_workspace_bytes(m, gm.rscg, gm.kg, max_threads()));
  }
  return gm;
}

// The epilogue's workspace (the sums' chunk partials), after the GEMM scratch.
uint64_t epilogue_bytes(const FrCall* call) {
  return sdk::has_conv_grad_epilogue(call) || sdk::has_conv_join_epilogue(call)
             ? grad_sums_workspace(bn_shape(call->in[3], "conv2d_backward"))
             : 0;
}

// The weight gradient's batchnorm prologue's output gradient (rows * K floats) and its K coefficients, after
// the epilogue's workspace.
uint64_t prologue_bytes(const FrCall* call) {
  if (!sdk::has_wgrad_bn_prologue(call)) return 0;
  const FrTensor& dy = call->in[0];
  return sdk::numel(dy) * sizeof(float) + dy.dims[dy.ndim - 1] * sizeof(FrBnGradCoefficients);
}

// The batchnorm gradient prologue of the weight gradient (ops.h): dy_bn = the batchnorm's dx from its output
// gradient g (premasked), its input y and its gradient sums, as its own backward computes it.
void grad_prologue(const FrCall* call, const sdk::BnWgradPrologue& p, float* dy_bn) {
  const BnShape s = bn_shape(call->in[3], "conv2d_backward");
  const float* g = sdk::data<const float>(call->in[0]);
  const float* y = static_cast<const float*>(p.y);
  auto* cf = reinterpret_cast<FrBnGradCoefficients*>(dy_bn + s.rows * s.c);
  for (int64_t k = 0; k < s.c; ++k)
    cf[k] = fr_bn_grad_coefficients(p.gsums[k], p.gsums[s.c + k], p.gamma[k], p.invstd[k],
                                    static_cast<double>(s.rows));
  parallel_chunks(s.rows, 256, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i)
      for (int64_t k = 0; k < s.c; ++k)
        dy_bn[i * s.c + k] =
            fr_bn_dx_value(g[i * s.c + k], y[i * s.c + k], p.mean[k], cf[k].a, cf[k].b, cf[k].k);
  });
}

// The batchnorm gradient epilogue (ops.h): dx masked by x > 0 (x is the batchnorm's relu output), then the
// batchnorm's gradient sums of it over bx.
void grad_epilogue(const FrCall* call, const sdk::BnGradEpilogue& e, float* dx, void* ws) {
  const BnShape s = bn_shape(call->in[3], "conv2d_backward");
  const float* x = sdk::data<const float>(call->in[1]);
  parallel_chunks(s.rows * s.c, 1 << 14, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) dx[i] = relu_masked(dx[i], x[i]);
  });
  write_grad_sums(s, dx, static_cast<const float*>(e.bx), e.bn.mean, static_cast<double*>(ws), e.gsums);
}

// The join epilogue (ops.h): dx = dx + b where x > 0 (x is the relu's output), else 0, as add_relu_backward
// writes it, then the batchnorm's gradient sums of it over bx.
void join_epilogue(const FrCall* call, const sdk::ConvJoinEpilogue& e, float* dx, void* ws) {
  const BnShape s = bn_shape(call->in[3], "conv2d_backward");
  const float* x = sdk::data<const float>(call->in[1]);
  const auto* b = static_cast<const float*>(e.b);
  parallel_chunks(s.rows * s.c, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dx[i] = relu_masked(dx[i] + b[i], x[i]);
  });
  write_grad_sums(s, dx, static_cast<const float*>(e.bx), e.mean, static_cast<double*>(ws), e.gsums);
}

}  // namespace

FR_CPU_KERNEL_PREPARE(conv2d_backward) {
  return sdk::guard([&] {
    *state = nullptr;
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const ConvGeom gm = checked_geometry(call, p);
    *workspace_bytes = gm.col_bytes + gm.gemm_bytes + epilogue_bytes(call) + prologue_bytes(call);
  });
}

FR_CPU_KERNEL_RUN(conv2d_backward) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrConvBackwardParams>(call);
    const ConvGeom gm = checked_geometry(call, p);
    FR_PLUGIN_CHECK(
        call->workspace_bytes >= gm.col_bytes + gm.gemm_bytes + epilogue_bytes(call) + prologue_bytes(call),
        FR_ERR_INVALID_ARGUMENT, "conv2d_backward: workspace too small");
    const sdk::ConvBackwardOutputs o = sdk::conv_backward_outputs(p);
    const sdk::BnGradEpilogue epilogue = sdk::conv_grad_epilogue(call, o.dx, o.count);
    const sdk::ConvJoinEpilogue join = sdk::conv_join_epilogue(call, o.dx, o.count);
    const sdk::BnWgradPrologue prologue = sdk::wgrad_bn_prologue(call);
    const float* dy = sdk::data<const float>(call->in[0]);
    if (prologue.y) {  // dy is the batchnorm's output gradient: its dx, into the workspace's end
      float* dy_bn = reinterpret_cast<float*>(static_cast<char*>(call->workspace) + gm.col_bytes +
                                              gm.gemm_bytes + epilogue_bytes(call));
      grad_prologue(call, prologue, dy_bn);
      dy = dy_bn;
    }
    const float* x = sdk::data<const float>(call->in[1]);
    const float* w = sdk::data<const float>(call->in[2]);
    float* dw = o.dw >= 0 ? sdk::data<float>(call->out[o.dw]) : nullptr;
    float* db = o.db >= 0 ? sdk::data<float>(call->out[o.db]) : nullptr;
    float* dx = o.dx >= 0 ? sdk::data<float>(call->out[o.dx]) : nullptr;
    float* col = static_cast<float*>(call->workspace);
    void* gemm_ws = static_cast<char*>(call->workspace) + gm.col_bytes;
    const int64_t pq = gm.p * gm.q, rows = gm.n * pq;
    const bool compact = sdk::conv_compact_dx(call, p, o);  // dx at dy's positions only (ops.h)

    if (db) {  // column sums of dy, rows in order
      parallel_chunks(gm.k, 64, [&](int64_t k0, int64_t k1) {
        std::fill(db + k0, db + k1, 0.0f);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t k = k0; k < k1; ++k) db[k] += dy[i * gm.k + k];
      });
    }

    // dw_g[Kg, RSCg] (+)= dy_g[m, Kg]^T a_g[m, RSCg]
    auto weight_grad = [&](const float* a, int64_t lda, int64_t a_group_stride, const float* dyb, int64_t m,
                           float beta) {
      for (int64_t g = 0; g < gm.g; ++g) {
        GemmArgs ga;
        ga.trans_a = true;
        ga.m = gm.kg;
        ga.n = gm.rscg;
        ga.k = m;
        ga.a = dyb + g * gm.kg;
        ga.lda = gm.k;
        ga.b = a + g * a_group_stride;
        ga.ldb = lda;
        ga.beta = beta;
        ga.c = dw + g * gm.kg * gm.rscg;
        ga.ldc = gm.rscg;
        sgemm(ga, gemm_ws, gm.gemm_bytes);
      }
    };
    // d_g[m, RSCg] = dy_g[m, Kg] w_g[Kg, RSCg]
    auto input_grad = [&](float* d, int64_t ldd, int64_t d_group_stride, const float* dyb, int64_t m) {
      for (int64_t g = 0; g < gm.g; ++g) {
        GemmArgs ga;
        ga.m = m;
        ga.n = gm.rscg;
        ga.k = gm.kg;
        ga.a = dyb + g * gm.kg;
        ga.lda = gm.k;
        ga.b = w + g * gm.kg * gm.rscg;
        ga.ldb = gm.rscg;
        ga.c = d + g * d_group_stride;
        ga.ldc = ldd;
        sgemm(ga, gemm_ws, gm.gemm_bytes);
      }
    };

    if (gm.direct) {  // 1x1, stride 1, no padding: x and dx are the column matrices
      if (dw) weight_grad(x, gm.c, gm.cg, dy, rows, 0.0f);
      if (dx) input_grad(dx, gm.c, gm.cg, dy, rows);
      if (epilogue.gsums) grad_epilogue(call, epilogue, dx, static_cast<char*>(gemm_ws) + gm.gemm_bytes);
      if (join.gsums) join_epilogue(call, join, dx, static_cast<char*>(gemm_ws) + gm.gemm_bytes);
      return;
    }
    for (int64_t n0 = 0; n0 < gm.n; n0 += gm.nb) {
      const int64_t nb = std::min(gm.nb, gm.n - n0);
      const float* dyb = dy + n0 * pq * gm.k;
      if (dw) {
        im2col(gm, x, n0, nb, col);
        weight_grad(col, gm.rsc, gm.rscg, dyb, nb * pq, n0 == 0 ? 0.0f : 1.0f);
      }
      if (dx && compact) {  // 1x1: the block's dcol is dx at dy's positions (what col2im would copy)
        input_grad(dx + n0 * pq * gm.c, gm.rsc, gm.rscg, dyb, nb * pq);
      } else if (dx) {
        input_grad(col, gm.rsc, gm.rscg, dyb, nb * pq);
        col2im(gm, col, n0, nb, dx);
      }
    }
    if (epilogue.gsums) grad_epilogue(call, epilogue, dx, static_cast<char*>(gemm_ws) + gm.gemm_bytes);
    if (join.gsums) join_epilogue(call, join, dx, static_cast<char*>(gemm_ws) + gm.gemm_bytes);
  });
}

}  // namespace fresco::cpu
