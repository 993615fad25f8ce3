// Shared by fresco-plugin-check's reference cases (cases/*.cpp): operands built from host values, the
// download's values, random inputs, the relative error against a double-precision reference, step scalars,
// bf16 rounding, and the case sizes M, K, N (odd, so no kernel's vector width divides them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <vector>

#include "op_cases.h"

namespace fresco::check {

using Bytes = std::vector<uint8_t>;

inline Operand f32(std::vector<float> v, std::initializer_list<int64_t> dims) {
  Operand o;
  o.host.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(o.host.data(), v.data(), o.host.size());  // (memcpy of null is undefined)
  int i = 0;
  for (int64_t d : dims) o.dims[i++] = d;
  return o;
}
template <class T>
inline Operand raw(const std::vector<T>& v, uint32_t dtype, std::initializer_list<int64_t> dims) {
  Operand o;
  o.dtype = dtype;
  o.host.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(o.host.data(), v.data(), o.host.size());
  int i = 0;
  for (int64_t d : dims) o.dims[i++] = d;
  return o;
}
template <class T>
inline Operand pod(const T& v) {
  Operand o;
  o.dtype = FR_U8;
  o.host.resize(sizeof(T));
  std::memcpy(o.host.data(), &v, sizeof(T));
  o.dims[3] = sizeof(T);
  return o;
}
template <class P>
inline Bytes params_of(const P& p) {
  Bytes b(sizeof(P));
  std::memcpy(b.data(), &p, sizeof(P));
  return b;
}
inline std::vector<float> floats(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}
inline std::vector<float> random(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}
inline double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() < ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / std::max(den, 1e-30);
}

inline FrStepScalars scalars(int32_t step) {
  FrStepScalars s{};
  s.lr = 0.01f;
  s.loss_scale = 1.0f;
  s.step = step;
  s.updates = step;  // no skipped steps
  s.seed_lo = 1234;
  s.seed_hi = 5;
  return s;
}

// x rounded to bf16 (nearest even), as the value a bf16 holds, and the bf16 bits of a downloaded buffer.
inline float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
// The bits of bf16_round(x).
inline uint16_t bf16_bits(float x) {
  const float r = bf16_round(x);
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}
inline std::vector<float> bf16_values(const Bytes& b) {
  std::vector<float> v(b.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

// The error of a range op that writes only the step scalars (rout[0]): 0 when they are `want`, bit for bit.
inline auto scalars_error(const FrStepScalars& want) {
  return [want](const auto&, const auto& rout) {
    FrStepScalars got;
    std::memcpy(&got, rout[0].data(), sizeof got);
    return std::memcmp(&got, &want, sizeof got) == 0 ? 0.0 : 1.0;
  };
}

inline constexpr int64_t M = 37, K = 53, N = 29;

}  // namespace fresco::check
