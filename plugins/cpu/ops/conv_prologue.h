// The batchnorm prologue of a CPU convolution (ops.h): x's transform relu(fma(x, scale, shift)), written into
// conv2d's applied-map output before the convolution reads it, scale and shift from the saved statistics as
// sdk::bn_prologue_scale_shift derives them. Internal to ops/conv2d.cpp; test:
// tests/plugins/cpu/test_conv_prologue.cpp.
#pragma once

#include "cpu_common.h"
#include "fresco/conv_prologue.hpp"

namespace fresco::cpu {

// out [rows, c] = the prologue of x [rows, c] (f32).
inline void apply_conv_prologue(const float* x, float* out, int64_t rows, int64_t c,
                                const sdk::BnPrologue& bn) {
  parallel_chunks(rows, 256, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i)
      for (int64_t k = 0; k < c; ++k) {
        float scale, shift;
        sdk::bn_prologue_scale_shift(bn, k, &scale, &shift);
        out[i * c + k] = sdk::bn_prologue_value(x[i * c + k], scale, shift);
      }
  });
}

}  // namespace fresco::cpu
