// CPU conversions between f32, f16 and bf16 element by element (cast.cpp, unscale_grads.cpp, the updates'
// 16-bit gradients): f16 through
// the compiler's _Float16, bf16 by the usual bit rounding.
#pragma once

#include <cstdint>
#include <cstring>

#include "fresco/plugin.h"

namespace fresco::cpu {

// Element i of a f32 / f16 / bf16 array as float.
inline float load_float(const void* data, uint32_t dtype, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(data);
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

// f stored as element i of a f32 / f16 / bf16 array, rounded to nearest even (NaN stays NaN).
inline void store_float(void* data, uint32_t dtype, int64_t i, float f) {
  auto* p = static_cast<uint8_t*>(data);
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

// An optimizer's weight copy (ops.h, FR_KERNEL_WEIGHT_COPY) of n weights w as they stand: on a skipped
// step, where the update writes nothing else.
inline void write_weight_copy(const float* w, const FrRange& copy, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_float(copy.data, copy.dtype, i, w[i]);
}

// An optimizer update's backups (ops.h, FR_KERNEL_UPDATE_BACKUPS; sdk::update_backups): rout[i]'s bytes as
// they are into backup[i] (null: none), before the update writes them.
inline void keep_backups(const FrCall* call, void* const* backup, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i)
    if (backup[i]) std::memcpy(backup[i], call->rout[i].data, call->rout[i].bytes);
}

// Runs f(grad), grad(i) an optimizer update's gradient i (ops.h): g[i] of an f32 range, or for 16-bit
// gradients (FR_KERNEL_HALF_GRADS) float(g[i]) * (1 / loss_scale), the products unscale_grads stores.
template <class F>
void with_update_grads(const FrRange& g, float loss_scale, F&& f) {
  if (g.dtype == FR_F32) {
    const float* v = static_cast<const float*>(g.data);
    f([v](int64_t i) { return v[i]; });
    return;
  }
  const float inv = 1.0f / loss_scale;
  f([&g, inv](int64_t i) { return load_float(g.data, g.dtype, i) * inv; });
}

}  // namespace fresco::cpu
