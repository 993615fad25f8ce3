// The positions of an NHWC map [N, H, W] that a stride-(sh, sw) subsample keeps (h % sh == 0, w % sw == 0)
// and where each lands in the subsampled map [N, (H - 1) / sh + 1, (W - 1) / sw + 1]: the geometry of
// add_relu_backward's compact part (ops/masked_grad_sums.h) and of batchnorm_add's subsampled output
// (ops/batchnorm.cu), both from ops.h. Host and device (tests/plugins/cuda/ops/test_strided_rows.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fresco::cuda {

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31 by a multiply-high and a shift (the round-up method: m =
// ceil(2^(31 + l) / d), l = ceil(log2 d), exact for every such n). The passes call it once or more per
// 16-byte vector, where 64-bit divisions (a software routine of about a hundred instructions each) made the
// subsampled join's apply pass compute-bound (forty-fifth session, ncu on an H200: 85 us against 52 for the
// same pass without the subsample).
struct FastDivU31 {
  uint32_t d = 1, m = 0, shift = 0;  // m == 0: d == 1
  static FastDivU31 of(int64_t divisor) {
    FastDivU31 f;
    f.d = static_cast<uint32_t>(divisor);
    if (f.d <= 1) return f;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < f.d) ++l;
    const uint64_t p = 31 + l;
    f.m = static_cast<uint32_t>(((uint64_t{1} << p) + f.d - 1) / f.d);
    f.shift = static_cast<uint32_t>(p - 32);
    return f;
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
    if (m == 0) return n;
#ifdef __CUDA_ARCH__
    return __umulhi(n, m) >> shift;
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32) >> shift;
#endif
  }
};

struct StridedRows {
  int64_t h = 0, w = 0;  // the full map's H and W; h == 0: no subsample
  int32_t sh = 1, sw = 1;
  // Set by strided_rows() for maps of fewer than 2^31 positions: row() divides by multiply-high.
  bool fast = false;
  FastDivU31 fh, fw, fsh, fsw;
  uint32_t ho = 0, wo = 0;  // the subsampled map's H and W
  // Row r's (a position of the full map) row in the subsampled map, or -1 when the subsample does not keep
  // it.
  __host__ __device__ __forceinline__ int64_t row(int64_t r) const {
    if (fast) {
      const auto rr = static_cast<uint32_t>(r);
      const uint32_t t = fw.div(rr), x = rr - t * fw.d, n = fh.div(t), y = t - n * fh.d;
      const uint32_t yq = fsh.div(y), xq = fsw.div(x);
      if (y != yq * fsh.d || x != xq * fsw.d) return -1;
      return (static_cast<int64_t>(n) * ho + yq) * wo + xq;
    }
    const int64_t x = r % w, t = r / w, y = t % h;
    if (y % sh != 0 || x % sw != 0) return -1;
    return ((t / h) * ((h - 1) / sh + 1) + y / sh) * ((w - 1) / sw + 1) + x / sw;
  }
};

// The subsample of a map of `positions` rows (N x H x W) with H = h, W = w, at stride (sh, sw).
inline StridedRows strided_rows(int64_t positions, int64_t h, int64_t w, int32_t sh, int32_t sw) {
  StridedRows s;
  s.h = h, s.w = w, s.sh = sh, s.sw = sw;
  constexpr int64_t kLimit = int64_t{1} << 31;
  s.fast = h > 0 && w > 0 && sh > 0 && sw > 0 && positions < kLimit && h < kLimit && w < kLimit;
  if (s.fast) {
    s.fh = FastDivU31::of(h), s.fw = FastDivU31::of(w), s.fsh = FastDivU31::of(sh),
    s.fsw = FastDivU31::of(sw);
    s.ho = static_cast<uint32_t>((h - 1) / sh + 1), s.wo = static_cast<uint32_t>((w - 1) / sw + 1);
  }
  return s;
}

}  // namespace fresco::cuda
