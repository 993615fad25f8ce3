// CUDA range op restore_if_skipped (ops.h; CompileOptions::speculative_update): one kernel reads skip_step
// on the device and returns at once on a step that was not skipped (every step but an fp16 overflow's);
// on a skipped one it copies every source back over its destination and writes each group's 16-bit weight
// copy as the cast of the restored weights (cast from the source, the same values: cast_range's bits).
// Groups beyond one launch's table go to further launches. Tests: fresco-plugin-check's case (vs the
// reference) and tests/plugins/cuda/test_cuda_speculative_update.cpp.
#include <cstring>

#include "cuda_common.h"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
constexpr int kMaxCopies = 24, kMaxCasts = 8;
struct RestoreJobs {
  int copies, casts;
  const uint8_t* src[kMaxCopies];
  uint8_t* dst[kMaxCopies];
  int64_t bytes[kMaxCopies];
  const float* w[kMaxCasts];  // the restored weights' source (the backup)
  void* copy[kMaxCasts];
  int64_t n[kMaxCasts];
  int bf16[kMaxCasts];
};

__global__ void restore_kernel(const __grid_constant__ RestoreJobs j, const FrStepScalars* s) {
  if (!s->skip_step) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int c = 0; c < j.copies; ++c) {
    const bool vec = ((reinterpret_cast<uintptr_t>(j.src[c]) | reinterpret_cast<uintptr_t>(j.dst[c]) |
                       static_cast<uintptr_t>(j.bytes[c])) &
                      15) == 0;
    if (vec) {
      const auto* a = reinterpret_cast<const uint4*>(j.src[c]);
      auto* b = reinterpret_cast<uint4*>(j.dst[c]);
      for (int64_t i = first; i < j.bytes[c] / 16; i += stride) b[i] = a[i];
    } else {
      for (int64_t i = first; i < j.bytes[c]; i += stride) j.dst[c][i] = j.src[c][i];
    }
  }
  for (int c = 0; c < j.casts; ++c)
    for (int64_t i = first; i < j.n[c]; i += stride) {
      if (j.bf16[c])
        static_cast<__nv_bfloat16*>(j.copy[c])[i] = from_f<__nv_bfloat16>(j.w[c][i]);
      else
        static_cast<__half*>(j.copy[c])[i] = from_f<__half>(j.w[c][i]);
    }
}
}  // namespace

FR_CUDA_KERNEL_RUN(restore_if_skipped) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrRestoreParams>(call);
    int64_t groups = 0;
    const FrStepScalars* s = sdk::restore_operands(call, p, &groups);
    const auto per = static_cast<uint32_t>(p.per_group),
               out_group = per + static_cast<uint32_t>(p.weight_copy);
    const unsigned grid = static_cast<unsigned>(4 * ctx_of(ctx)->sm_count);
    RestoreJobs j{};
    auto launch = [&] {
      restore_kernel<<<grid, 256, 0, stream_of(call)>>>(j, s);
      FR_CUDA_LAUNCH_CHECK();
      j = RestoreJobs{};
    };
    for (uint32_t k = 0; k < static_cast<uint32_t>(groups); ++k) {
      if (j.copies + static_cast<int>(per) > kMaxCopies || j.casts + p.weight_copy > kMaxCasts) launch();
      for (uint32_t i = 0; i < per; ++i) {
        const FrRange &src = call->rin[k * per + i], &dst = call->rout[k * out_group + i];
        j.src[j.copies] = static_cast<const uint8_t*>(src.data);
        j.dst[j.copies] = static_cast<uint8_t*>(dst.data);
        j.bytes[j.copies++] = static_cast<int64_t>(src.bytes);
      }
      if (!p.weight_copy) continue;
      const FrRange &w = call->rin[k * per], &c = call->rout[k * out_group + per];
      j.w[j.casts] = static_cast<const float*>(w.data);
      j.copy[j.casts] = c.data;
      j.n[j.casts] = static_cast<int64_t>(w.bytes / sizeof(float));
      j.bf16[j.casts++] = c.dtype == FR_BF16;
    }
    if (j.copies > 0) launch();
  });
}

}  // namespace fresco::cuda
