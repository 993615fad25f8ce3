// CPU flatten_chw: x [N,H,W,C] (NHWC) -> y [N,1,1,C*H*W] in PyTorch's C,H,W order (a per-sample transpose
// of [H*W, C] to [C, H*W]), and its inverse for the backward. Out-of-place (no aliasing unless H*W or C is
// 1); each task writes its own elements. Test: test_add_gelu_flatten.cpp.
#include <algorithm>

#include "cpu_common.h"

namespace fresco::cpu {

namespace {

// Shared shape checks: `nhwc` is the 4-D map, `flat` the [N, C*H*W] view; returns {n, hw, c}.
struct FlatShape {
  int64_t n, hw, c;
};

FlatShape flat_shape(const FrTensor& nhwc, const FrTensor& flat, const void* src, const void* dst,
                     const char* op) {
  const std::string o(op);
  FR_PLUGIN_CHECK(nhwc.ndim == 4, FR_ERR_INVALID_ARGUMENT, o + ": the map must be 4-D NHWC");
  FlatShape s{nhwc.dims[0], nhwc.dims[1] * nhwc.dims[2], nhwc.dims[3]};
  FR_PLUGIN_CHECK(flat.dims[0] == s.n && sdk::numel(flat) == sdk::numel(nhwc), FR_ERR_INVALID_ARGUMENT,
                  o + ": flat tensor must be [N, C*H*W]");
  FR_PLUGIN_CHECK(src != dst || s.hw == 1 || s.c == 1, FR_ERR_INVALID_ARGUMENT,
                  o + ": output must not alias the input");
  return s;
}

// dst[b][j][i] = src[b][i][j] for a per-sample [rows, cols] matrix, in tiles; parallel over (sample, tile
// row).
void transpose_batched(const float* src, float* dst, int64_t n, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  parallel_chunks(n * row_tiles, std::max<int64_t>(1, 256 / std::max<int64_t>(1, cols / kTile)),
                  [&](int64_t a, int64_t b) {
                    for (int64_t t = a; t < b; ++t) {
                      const int64_t img = t / row_tiles, i0 = (t % row_tiles) * kTile;
                      const int64_t i1 = std::min(rows, i0 + kTile);
                      const float* s = src + img * rows * cols;
                      float* d = dst + img * rows * cols;
                      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
                        const int64_t j1 = std::min(cols, j0 + kTile);
                        for (int64_t j = j0; j < j1; ++j)
                          for (int64_t i = i0; i < i1; ++i) d[j * rows + i] = s[i * cols + j];
                      }
                    }
                  });
}

}  // namespace

FR_CPU_KERNEL_RUN(flatten_chw) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "flatten_chw");
    const FlatShape s =
        flat_shape(call->in[0], call->out[0], call->in[0].data, call->out[0].data, "flatten_chw");
    transpose_batched(sdk::data<float>(call->in[0]), sdk::data<float>(call->out[0]), s.n, s.hw, s.c);
  });
}

FR_CPU_KERNEL_RUN(flatten_chw_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "flatten_chw_backward");
    const FlatShape s =
        flat_shape(call->out[0], call->in[0], call->in[0].data, call->out[0].data, "flatten_chw_backward");
    transpose_batched(sdk::data<float>(call->in[0]), sdk::data<float>(call->out[0]), s.n, s.c, s.hw);
  });
}

}  // namespace fresco::cpu
