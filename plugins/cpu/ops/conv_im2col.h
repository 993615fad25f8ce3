// CPU convolution pieces shared by conv2d.cpp and conv2d_backward.cpp: the checked geometry extended with the
// im2col blocking (images per block, column-buffer bytes) and im2col itself. Tests: test_conv2d.cpp.
#pragma once

#include <algorithm>
#include <cstring>

#include "cpu_common.h"
#include "fresco/conv_geometry.hpp"

namespace fresco::cpu {

// Floats of im2col scratch aimed at per block of images (the block holds at least one image).
inline constexpr int64_t kColTargetFloats = int64_t{1} << 20;

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
inline ConvGeom conv_geometry(const char* op, const FrConvParams& p, const FrTensor& x, const FrTensor& w,
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
inline void im2col(const ConvGeom& gm, const float* x, int64_t n0, int64_t nb, float* col) {
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

}  // namespace fresco::cpu
