// CPU range op restore_if_skipped (ops.h; CompileOptions::speculative_update): on a step that loss scaling
// skips, every destination gets its source's bytes back and each group's 16-bit weight copy the cast of its
// restored f32 weights (the bits cast_range gives); on any other step nothing is written. Test:
// tests/plugins/cpu/test_restore_if_skipped.cpp.
#include <cstring>

#include "cpu_common.h"
#include "ops/float_convert.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(restore_if_skipped) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrRestoreParams>(call);
    int64_t groups = 0;
    const FrStepScalars* s = sdk::restore_operands(call, p, &groups);
    if (!s->skip_step) return;
    const auto per = static_cast<uint32_t>(p.per_group),
               out_group = per + static_cast<uint32_t>(p.weight_copy);
    for (uint32_t k = 0; k < static_cast<uint32_t>(groups); ++k) {
      for (uint32_t i = 0; i < per; ++i) {
        const FrRange &src = call->rin[k * per + i], &dst = call->rout[k * out_group + i];
        std::memmove(dst.data, src.data, src.bytes);
      }
      if (!p.weight_copy) continue;
      const FrRange &w = call->rout[k * out_group], &c = call->rout[k * out_group + per];
      const auto n = static_cast<int64_t>(w.bytes / sizeof(float));
      parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) store_float(c.data, c.dtype, i, load_float(w.data, FR_F32, i));
      });
    }
  });
}

}  // namespace fresco::cpu
