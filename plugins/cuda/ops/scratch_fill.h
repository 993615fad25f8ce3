// Random f16 / bf16 / f32 contents for timing scratch (ops/scratch_fill.cu), on the default stream.
#pragma once

#include <cstdint>

#include "cuda_common.h"

namespace fresco::cuda {

void fill_scratch_random(FrDType dtype, void* p, int64_t n, uint32_t seed, int sm_count);

}  // namespace fresco::cuda
