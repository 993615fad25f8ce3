// Geometry of a conv2d / conv2d_backward call (ops.h: NHWC maps, weights [K, R, S, C/g]) validated once for
// every backend: params ranges, channels divisible by groups, the dilated kernel fitting the padded input,
// the weight shape and the output shape [N,P,Q,K]. Header-only, C++17; part of the SDK helpers beside
// plugin.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

struct ConvShape {
  int64_t n, h, w, c, k, r, s, p, q, g, cg, kg;
  int64_t sh, sw, ph, pw, dh, dw;
};

inline int64_t dim_or_1(const FrTensor& t, int i) {
  return static_cast<uint32_t>(i) < t.ndim ? t.dims[i] : 1;
}

inline std::string shape_str(const FrTensor& t) {
  return "[" + std::to_string(dim_or_1(t, 0)) + "," + std::to_string(dim_or_1(t, 1)) + "," +
         std::to_string(dim_or_1(t, 2)) + "," + std::to_string(dim_or_1(t, 3)) + "]";
}

// x the input map, w the weights, y the output (or, backward, dy); `op` names the op in error messages.
inline ConvShape conv_shape(const char* op, const FrConvParams& p, const FrTensor& x, const FrTensor& w,
                            const FrTensor& y) {
  const std::string o(op);
  FR_PLUGIN_CHECK(p.kh >= 1 && p.kw >= 1 && p.stride_h >= 1 && p.stride_w >= 1 && p.pad_h >= 0 &&
                      p.pad_w >= 0 && p.dil_h >= 1 && p.dil_w >= 1 && p.groups >= 1,
                  FR_ERR_INVALID_ARGUMENT, o + ": invalid kernel/stride/padding/dilation/groups params");
  ConvShape gm{};
  gm.n = dim_or_1(x, 0), gm.h = dim_or_1(x, 1), gm.w = dim_or_1(x, 2), gm.c = dim_or_1(x, 3);
  gm.k = dim_or_1(w, 0), gm.r = p.kh, gm.s = p.kw, gm.g = p.groups;
  gm.sh = p.stride_h, gm.sw = p.stride_w, gm.ph = p.pad_h, gm.pw = p.pad_w, gm.dh = p.dil_h, gm.dw = p.dil_w;
  FR_PLUGIN_CHECK(gm.n >= 1 && gm.h >= 1 && gm.w >= 1 && gm.c >= 1 && gm.k >= 1, FR_ERR_INVALID_ARGUMENT,
                  o + ": empty x " + shape_str(x) + " or w " + shape_str(w));
  FR_PLUGIN_CHECK(gm.c % gm.g == 0 && gm.k % gm.g == 0, FR_ERR_INVALID_ARGUMENT,
                  o + ": channels C=" + std::to_string(gm.c) + " and K=" + std::to_string(gm.k) +
                      " must be multiples of groups=" + std::to_string(gm.g));
  gm.cg = gm.c / gm.g, gm.kg = gm.k / gm.g;
  const int64_t eff_h = gm.dh * (gm.r - 1) + 1, eff_w = gm.dw * (gm.s - 1) + 1;
  FR_PLUGIN_CHECK(gm.h + 2 * gm.ph >= eff_h && gm.w + 2 * gm.pw >= eff_w, FR_ERR_INVALID_ARGUMENT,
                  o + ": dilated kernel larger than the padded input " + shape_str(x));
  FR_PLUGIN_CHECK(dim_or_1(w, 1) == gm.r && dim_or_1(w, 2) == gm.s && dim_or_1(w, 3) == gm.cg,
                  FR_ERR_INVALID_ARGUMENT,
                  o + ": weight " + shape_str(w) + " is not [K," + std::to_string(gm.r) + "," +
                      std::to_string(gm.s) + "," + std::to_string(gm.cg) + "] (C/groups input channels)");
  gm.p = (gm.h + 2 * gm.ph - eff_h) / gm.sh + 1;
  gm.q = (gm.w + 2 * gm.pw - eff_w) / gm.sw + 1;
  FR_PLUGIN_CHECK(
      dim_or_1(y, 0) == gm.n && dim_or_1(y, 1) == gm.p && dim_or_1(y, 2) == gm.q && dim_or_1(y, 3) == gm.k,
      FR_ERR_INVALID_ARGUMENT,
      o + ": output shape " + shape_str(y) + " != expected [" + std::to_string(gm.n) + "," +
          std::to_string(gm.p) + "," + std::to_string(gm.q) + "," + std::to_string(gm.k) + "]");
  return gm;
}

}  // namespace fresco::sdk
