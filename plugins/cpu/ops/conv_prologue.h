// The batchnorm prologue of a CPU convolution (ops.h): x's transform relu(fma(x, scale, shift)) (the join
// prologue: relu(fma(x, scale, shift) + r)), written into conv2d's applied-map output before the convolution
// reads it, scale and shift from the saved statistics as sdk::bn_prologue_scale_shift derives them. Internal to ops/conv2d.cpp; test:
// tests/plugins/cpu/test_conv_prologue.cpp.
#pragma once

#include "cpu_common.h"
#include "fresco/conv_prologue.hpp"

namespace fresco::cpu {

// out [rows, c] = the prologue of x [rows, c] (f32); with r (the join prologue's residual, x's shape) r is
// added before the relu.
inline void apply_conv_prologue(const float* x, float* out, int64_t rows, int64_t c,
                                const sdk::BnPrologue& bn, const float* r = nullptr) {
  parallel_chunks(rows, 256, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i)
      for (int64_t k = 0; k < c; ++k) {
        float scale, shift;
        sdk::bn_prologue_scale_shift(bn, k, &scale, &shift);
        const float v = x[i * c + k];
        out[i * c + k] = r ? sdk::bn_prologue_value(v, scale, shift, r[i * c + k])
                           : sdk::bn_prologue_value(v, scale, shift);
      }
  });
}

}  // namespace fresco::cpu
