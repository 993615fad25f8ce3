// The largest float that rounds to zero (or below) in a map's dtype, to nearest even: half the smallest
// positive subnormal of T (2^-25 for f16, 2^-134 for bf16; for f32 itself 0). A float v then rounds to a
// positive T exactly when v > kRoundsToZeroBelow<T> (at the threshold itself the tie goes to even, zero), so
// a relu's mask on a stored T needs no conversion (ops/batchnorm_relu_mask.cuh). Host and device;
// test: tests/plugins/cuda/ops/test_rounds_to_zero.cpp (the host's round-to-nearest conversions).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace fresco::cuda {

template <class T>
inline constexpr float kRoundsToZeroBelow = std::is_same_v<T, __half>          ? 0x1p-25f
                                            : std::is_same_v<T, __nv_bfloat16> ? 0x1p-134f
                                                                               : 0.0f;

}  // namespace fresco::cuda
