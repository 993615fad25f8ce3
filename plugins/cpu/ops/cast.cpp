// CPU casts between f32, f16 and bf16 (ops.h): `cast` converts one tensor, `cast_range` a region range
// element by element. Rounding to nearest even (f16 through the compiler's _Float16, bf16 by the usual bit
// rounding); NaN stays NaN. The CPU backend trains in fp32 only, so these serve the identical graph's casts
// and fresco-plugin-check. Test: tests/plugins/cpu/test_range_ops.cpp.
#include <cstring>

#include "cpu_common.h"
#include "ops/float_convert.h"

namespace fresco::cpu {

namespace {
void convert(const void* src, uint32_t st, void* dst, uint32_t dt, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) store_float(d, dt, i, load_float(s, st, i));
  });
}
}  // namespace

FR_CPU_KERNEL_RUN(cast) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "cast");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "cast: x and y sizes differ");
    sdk::float_bytes(call->in[0].dtype, "cast");
    sdk::float_bytes(call->out[0].dtype, "cast");
    convert(call->in[0].data, call->in[0].dtype, call->out[0].data, call->out[0].dtype, n);
  });
}

FR_CPU_KERNEL_RUN(cast_range) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 1, 1, "cast_range");
    const FrRange &src = call->rin[0], &dst = call->rout[0];
    convert(src.data, src.dtype, dst.data, dst.dtype, sdk::cast_elements(src, dst, "cast_range"));
  });
}

}  // namespace fresco::cpu
