// Non-zero f32 / f16 / bf16 contents for timing scratch (ops/scratch_fill.cu).
#pragma once

#include <cstdint>

#include "cuda_common.h"

namespace fresco::cuda {

// n values of dtype at p, in [-scale, scale], written on stream s.
void fill_scratch(FrDType dtype, void* p, int64_t n, float scale, cudaStream_t s);

}  // namespace fresco::cuda
