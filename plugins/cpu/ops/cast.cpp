// CPU casts between f32, f16 and bf16 (ops.h): `cast` converts one tensor, `cast_range` a region range
// element by element. Rounding to nearest even (f16 through the compiler's _Float16, bf16 by the usual bit
// rounding); NaN stays NaN. The CPU backend trains in fp32 only, so these serve the identical graph's casts
// and fresco-plugin-check. Test: tests/plugins/cpu/test_range_ops.cpp.
#include <cstring>

#include "cpu_common.h"

namespace fresco::cpu {

namespace {
float load(const uint8_t* p, uint32_t dtype, int64_t i) {
  if (dtype == FR_F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  if (dtype == FR_F16) {
    _Float16 v;
    std::memcpy(&v, &h, 2);
    return static_cast<float>(v);
  }
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void store(uint8_t* p, uint32_t dtype, int64_t i, float f) {
  if (dtype == FR_F32) {
    std::memcpy(p + 4 * i, &f, 4);
    return;
  }
  uint16_t h;
  if (dtype == FR_F16) {
    const _Float16 v = static_cast<_Float16>(f);
    std::memcpy(&h, &v, 2);
  } else {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    h = (u & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((u >> 16) | 0x40u)  // NaN stays NaN
                                        : static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  std::memcpy(p + 2 * i, &h, 2);
}

void convert(const void* src, uint32_t st, void* dst, uint32_t dt, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  parallel_chunks(n, 1 << 15, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) store(d, dt, i, load(s, st, i));
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
