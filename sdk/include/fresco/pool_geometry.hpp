// Geometry of 2-D pooling calls on NHWC maps (max_pool2d, avg_pool2d, global_avg_pool and their backwards,
// ops.h), validated
// once for every backend: kernel, stride and padding ranges, the window fitting the padded input, and the
// output shape [N,P,Q,C]. Header-only, C++17; part of the SDK helpers beside plugin.hpp.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

#if defined(__CUDACC__)
#define FR_POOL_HD __host__ __device__
#else
#define FR_POOL_HD
#endif

namespace fresco::sdk {

struct PoolGeom {
  int64_t n, h, w, c, p, q;
  int64_t kh, kw, sh, sw, ph, pw;
};

// x [N,H,W,C] is the input side, y [N,P,Q,C] the output side; throws (FR_PLUGIN_CHECK) on any mismatch.
inline PoolGeom pool_geom(const FrPoolParams& pp, const FrTensor& x, const FrTensor& y, const char* op) {
  const std::string o(op);
  FR_PLUGIN_CHECK(x.ndim == 4 && y.ndim == 4, FR_ERR_INVALID_ARGUMENT, o + ": tensors must be 4-D NHWC");
  FR_PLUGIN_CHECK(
      pp.kh >= 1 && pp.kw >= 1 && pp.stride_h >= 1 && pp.stride_w >= 1 && pp.pad_h >= 0 && pp.pad_w >= 0,
      FR_ERR_INVALID_ARGUMENT, o + ": bad kernel size, stride or padding");
  FR_PLUGIN_CHECK(2 * pp.pad_h <= pp.kh && 2 * pp.pad_w <= pp.kw, FR_ERR_INVALID_ARGUMENT,
                  o + ": padding must be at most half the kernel size");
  PoolGeom g{x.dims[0], x.dims[1], x.dims[2],   x.dims[3],   0,        0,
             pp.kh,     pp.kw,     pp.stride_h, pp.stride_w, pp.pad_h, pp.pad_w};
  FR_PLUGIN_CHECK(g.h + 2 * g.ph >= g.kh && g.w + 2 * g.pw >= g.kw, FR_ERR_INVALID_ARGUMENT,
                  o + ": window larger than the padded input");
  g.p = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.q = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  FR_PLUGIN_CHECK(y.dims[0] == g.n && y.dims[1] == g.p && y.dims[2] == g.q && y.dims[3] == g.c,
                  FR_ERR_INVALID_ARGUMENT,
                  o + ": output shape [" + std::to_string(y.dims[0]) + "," + std::to_string(y.dims[1]) + "," +
                      std::to_string(y.dims[2]) + "," + std::to_string(y.dims[3]) + "] != expected [" +
                      std::to_string(g.n) + "," + std::to_string(g.p) + "," + std::to_string(g.q) + "," +
                      std::to_string(g.c) + "]");
  return g;
}

struct GapShape {
  int64_t n, hw, c;
};

// Global average pool shapes: `map` [N,H,W,C] and `pooled` [N,1,1,C], named in error messages as given.
inline GapShape gap_shape(const FrTensor& map, const FrTensor& pooled, const char* op, const char* map_name,
                          const char* pooled_name) {
  const std::string o(op);
  FR_PLUGIN_CHECK(map.ndim == 4, FR_ERR_INVALID_ARGUMENT, o + ": " + map_name + " must be 4-D NHWC");
  const GapShape g{map.dims[0], map.dims[1] * map.dims[2], map.dims[3]};
  FR_PLUGIN_CHECK(g.hw >= 1 && g.c >= 1, FR_ERR_INVALID_ARGUMENT, o + ": empty input");
  FR_PLUGIN_CHECK(pooled.dims[0] == g.n && numel(pooled) == g.n * g.c && pooled.dims[pooled.ndim - 1] == g.c,
                  FR_ERR_INVALID_ARGUMENT, o + ": " + pooled_name + " must be [N,1,1,C]");
  return g;
}

// First output row/column whose window covers input position `pos` (the backward's gather bound); usable
// in device code.
FR_POOL_HD inline constexpr int64_t first_covering(int64_t pos, int64_t pad, int64_t k, int64_t stride) {
  const int64_t num = pos + pad - k + 1;  // smallest i with i * stride >= num
  return num <= 0 ? int64_t{0} : (num + stride - 1) / stride;
}

}  // namespace fresco::sdk
