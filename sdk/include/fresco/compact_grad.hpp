// The compact gradient part of a strided 1x1 conv (ops.h, FR_KERNEL_COMPACT_GRAD): conv2d_backward's input
// gradient at dy's positions only, and add_relu_backward's second part b at those positions. The checks and
// the geometry every backend shares, so the messages and rules are the same. Header-only, C++17.
#pragma once

#include <cstdint>
#include <string>

#include "fresco/conv_backward_parts.hpp"
#include "fresco/conv_geometry.hpp"
#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// Whether a conv2d_backward call writes its input gradient compact: dx (at out[o.dx]) holds N P Q C values
// (dy's positions, x's channels) where x holds N H W C. Checked: then a part-1 call of a 1x1 conv with
// padding 0, dilation 1 and one group, dx with dy's N, P, Q and x's C and dtype; otherwise dx must have x's
// size (the plain form).
inline bool conv_compact_dx(const FrCall* call, const FrConvBackwardParams& p, const ConvBackwardOutputs& o) {
  if (o.dx < 0) return false;
  const FrTensor &dy = call->in[0], &x = call->in[1], &dx = call->out[o.dx];
  if (numel(dx) == numel(x)) return false;
  const FrConvParams& c = p.conv;
  FR_PLUGIN_CHECK(dy.ndim == 4 && x.ndim == 4 && dx.ndim == 4, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: dx " + shape_str(dx) + " differs from x " + shape_str(x) +
                      " and is not a compact input gradient (dy, x and dx 4-d)");
  FR_PLUGIN_CHECK(p.part == 1 && c.kh == 1 && c.kw == 1 && c.pad_h == 0 && c.pad_w == 0 && c.dil_h == 1 &&
                      c.dil_w == 1 && c.groups == 1,
                  FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: dx " + shape_str(dx) + " differs from x " + shape_str(x) +
                      "; a compact input gradient (ops.h) is for part 1 of a 1x1 conv with padding 0, "
                      "dilation 1 and one group");
  FR_PLUGIN_CHECK(dx.dims[0] == dy.dims[0] && dx.dims[1] == dy.dims[1] && dx.dims[2] == dy.dims[2] &&
                      dx.dims[3] == x.dims[3] && dx.dtype == x.dtype,
                  FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: a compact input gradient has dy's positions and x's channels and dtype: "
                  "dx " +
                      shape_str(dx) + ", dy " + shape_str(dy) + ", x " + shape_str(x));
  return true;
}

// add_relu_backward's second part b and where it adds: a [N, H, W, C]; b the same, or compact [N, P, Q, C]
// with the params' strides (ops.h). stride_h = stride_w = 1: b has a's size.
struct CompactPart {
  int32_t stride_h = 1, stride_w = 1;
  int64_t n = 1, h = 1, w = 1, c = 1, p = 1, q = 1;  // a's N, H, W, C and b's P, Q
  bool compact() const { return stride_h > 1 || stride_w > 1; }
};

// The part b of an add_relu_backward call (inputs a, b, y; dx out[0]): checked against a, y and dx.
inline CompactPart add_relu_backward_part(const FrCall* call, const char* op) {
  CompactPart part;
  const FrTensor &a = call->in[0], &b = call->in[1];
  if (call->params_size) {
    const auto& pr = params<FrAddReluBackwardParams>(call);
    FR_PLUGIN_CHECK(pr.stride_h >= 1 && pr.stride_w >= 1, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": the compact part's strides must be at least 1, got " +
                        std::to_string(pr.stride_h) + " and " + std::to_string(pr.stride_w));
    part.stride_h = pr.stride_h, part.stride_w = pr.stride_w;
  }
  const int64_t n = numel(a);
  FR_PLUGIN_CHECK(numel(call->in[2]) == n && call->in[2].dtype == a.dtype, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": sizes differ (y and a, or their dtypes)");
  FR_PLUGIN_CHECK(numel(call->out[0]) == n && call->out[0].dtype == a.dtype && b.dtype == a.dtype,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": sizes differ (dx and a), or dtypes (dx, b and a)");
  if (!part.compact()) {
    FR_PLUGIN_CHECK(numel(b) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": sizes differ: b " + shape_str(b) + ", a " + shape_str(a) +
                        " (a compact b takes FrAddReluBackwardParams with its strides)");
    part.n = n;
    return part;
  }
  FR_PLUGIN_CHECK(
      a.ndim == 4 && b.ndim == 4, FR_ERR_INVALID_ARGUMENT,
      std::string(op) + ": a compact part needs 4-d a and b, got a " + shape_str(a) + ", b " + shape_str(b));
  part.n = a.dims[0], part.h = a.dims[1], part.w = a.dims[2], part.c = a.dims[3];
  FR_PLUGIN_CHECK(
      part.n >= 1 && part.h >= 1 && part.w >= 1 && part.c >= 1, FR_ERR_INVALID_ARGUMENT,
      std::string(op) + ": a compact part needs a map with every side at least 1, got a " + shape_str(a));
  part.p = (part.h - 1) / part.stride_h + 1, part.q = (part.w - 1) / part.stride_w + 1;
  FR_PLUGIN_CHECK(b.dims[0] == part.n && b.dims[1] == part.p && b.dims[2] == part.q && b.dims[3] == part.c,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": with strides " + std::to_string(part.stride_h) + " x " +
                      std::to_string(part.stride_w) + " the compact part of a " + shape_str(a) +
                      " must be [" + std::to_string(part.n) + "," + std::to_string(part.p) + "," +
                      std::to_string(part.q) + "," + std::to_string(part.c) + "], got " + shape_str(b));
  return part;
}

}  // namespace fresco::sdk
