// The positions of an NHWC map [N, H, W] that a stride-(sh, sw) subsample keeps (h % sh == 0, w % sw == 0)
// and where each lands in the subsampled map [N, (H - 1) / sh + 1, (W - 1) / sw + 1]: the geometry of
// add_relu_backward's compact part (ops/masked_grad_sums.h) and of batchnorm_add's subsampled output
// (ops/batchnorm.cu), both from ops.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fresco::cuda {

struct StridedRows {
  int64_t h = 0, w = 0;  // the full map's H and W; h == 0: no subsample
  int32_t sh = 1, sw = 1;
  // Row r's (a position of the full map) row in the subsampled map, or -1 when the subsample does not keep
  // it.
  __device__ __forceinline__ int64_t row(int64_t r) const {
    const int64_t x = r % w, t = r / w, y = t % h;
    if (y % sh != 0 || x % sw != 0) return -1;
    return ((t / h) * ((h - 1) / sh + 1) + y / sh) * ((w - 1) / sw + 1) + x / sw;
  }
};

}  // namespace fresco::cuda
