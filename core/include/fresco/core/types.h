// Element types and logical NHWC shapes shared by every core module.
// Invariant: a Shape always has 4 dims (N,H,W,C), unused ones are 1; an FC activation is N x 1 x 1 x C.
// Tested by tests/core/test_memory_plan.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "fresco/plugin.h"

namespace fresco {

enum class DType : uint32_t {
  F32 = FR_F32,
  F16 = FR_F16,
  BF16 = FR_BF16,
  I32 = FR_I32,
  I8 = FR_I8,
  U8 = FR_U8
};

uint32_t dtype_size(DType t) noexcept;

// The product of non-negative factors, or -1 when a factor is negative or the product overflows int64: sizes
// from user input are multiplied through this before anything trusts them.
inline int64_t checked_product(std::initializer_list<int64_t> factors) noexcept {
  int64_t p = 1;
  for (int64_t f : factors)
    if (f < 0 || __builtin_mul_overflow(p, f, &p)) return -1;
  return p;
}
const char* dtype_name(DType t) noexcept;

struct Shape {
  int64_t n = 1, h = 1, w = 1, c = 1;
  int64_t numel() const noexcept { return n * h * w * c; }
  int64_t per_sample() const noexcept { return h * w * c; }
  Shape with_batch(int64_t batch) const noexcept { return {batch, h, w, c}; }
  bool operator==(const Shape&) const = default;
  std::string str() const;
};

}  // namespace fresco
