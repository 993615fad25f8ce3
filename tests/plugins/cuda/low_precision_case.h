// Shared by the low-precision CUDA tests (test_cuda_low_precision*.cpp): host rounding to bf16 / f16, and a
// case (one node over tensors, some in the low dtype) run on CUDA in f32 and in bf16 / f16 on the same values
// (every low input first rounded to the low dtype), the outputs compared within the low dtype's rounding.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/cuda/gpu_fixture.h"
#include "reference/batchnorm.h"

namespace fresco::gpu_test {

// Host rounding to nearest even (NaN-free inputs here).
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t to_f16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float from_f16(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}
inline uint16_t to_low(DType t, float f) {
  return t == DType::BF16 ? to_bf16(f) : to_f16(f);
}
inline float from_low(DType t, uint16_t u) {
  return t == DType::BF16 ? from_bf16(u) : from_f16(u);
}

struct LowTensor {
  Shape shape;
  Fill fill;  // RANDOM, POSITIVE, ZERO or BYTES (u8)
  bool low;   // stored in the low dtype in the low-precision run
};

struct LowCase {
  std::vector<LowTensor> tensors;
  GraphNode node;
  std::vector<TensorId> outputs;
};

// Values of every tensor for one seed, already representable in `low` where the tensor is low.
inline std::vector<std::vector<float>> values_of(const LowCase& c, DType low, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> v;
  for (const LowTensor& t : c.tensors) {
    std::vector<float> x(static_cast<size_t>(t.shape.numel()), 0.0f);
    if (t.fill == Fill::RANDOM || t.fill == Fill::POSITIVE) {
      std::uniform_real_distribution<float> d(t.fill == Fill::POSITIVE ? 0.05f : -1.0f, 1.0f);
      for (float& f : x) f = t.low ? from_low(low, to_low(low, d(rng))) : d(rng);
    } else if (t.fill == Fill::BYTES) {
      std::uniform_int_distribution<int> d(0, 255);
      for (float& f : x) f = static_cast<float>(d(rng));
    }
    v.push_back(std::move(x));
  }
  return v;
}

// Writes float values into tensor id of dtype dt: as they are in F32, rounded to the low dtype otherwise.
inline void write_values(SimpleTask& t, TensorId id, DType dt, const std::vector<float>& v) {
  if (dt == DType::F32) {
    t.write(id, v);
    return;
  }
  std::vector<uint16_t> b(v.size());
  for (size_t j = 0; j < b.size(); ++j) b[j] = to_low(dt, v[j]);
  t.write(id, b);
}

// The first n values of tensor id of dtype dt as floats (write_values' reverse).
inline std::vector<float> read_values(SimpleTask& t, TensorId id, DType dt, size_t n) {
  if (dt == DType::F32) return t.read<float>(id, n);
  const auto b = t.read<uint16_t>(id, n);
  std::vector<float> f(n);
  for (size_t j = 0; j < n; ++j) f[j] = from_low(dt, b[j]);
  return f;
}

// Runs the case on CUDA with low tensors in `dt` (F32 for the reference run); returns the outputs as floats.
inline std::vector<std::vector<float>> run_low(const LowCase& c, DType dt,
                                               const std::vector<std::vector<float>>& v) {
  SimpleTask t("cuda");
  auto dtype_of = [&](const LowTensor& s) {
    return s.fill == Fill::BYTES ? DType::U8 : s.low ? dt : DType::F32;
  };
  for (size_t i = 0; i < c.tensors.size(); ++i)
    t.tensor(Region::T_TEMP, dtype_of(c.tensors[i]), c.tensors[i].shape, "t" + std::to_string(i));
  t.lock_memory();
  t.add(GraphId::DEEP_FWD_BWD, c.node);
  t.compile();
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const DType d = dtype_of(c.tensors[i]);
    if (d == DType::U8) {
      std::vector<uint8_t> b(v[i].size());
      for (size_t j = 0; j < b.size(); ++j) b[j] = static_cast<uint8_t>(v[i][j]);
      t.write(static_cast<TensorId>(i), b);
    } else {
      write_values(t, static_cast<TensorId>(i), d, v[i]);
    }
  }
  t.run(GraphId::DEEP_FWD_BWD);
  std::vector<std::vector<float>> out;
  for (TensorId id : c.outputs) {
    const LowTensor& s = c.tensors[static_cast<size_t>(id)];
    out.push_back(read_values(t, id, dtype_of(s), static_cast<size_t>(s.shape.numel())));
  }
  return out;
}

inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-30);
}

// bf16 keeps 8 significant bits, f16 11: tolerances are a few roundings of the output.
inline void expect_close_to_f32(const LowCase& c, double bf16_tol, double f16_tol, const std::string& what) {
  for (DType low : {DType::BF16, DType::F16}) {
    const auto v = values_of(c, low, 7);
    const auto ref = run_low(c, DType::F32, v);
    const auto got = run_low(c, low, v);
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = max_rel(got[i], ref[i]);
      EXPECT_LE(d, low == DType::BF16 ? bf16_tol : f16_tol)
          << what << " in " << dtype_name(low) << ": output " << i << " differs from f32 by " << d;
      EXPECT_GT(max_rel(ref[i], std::vector<float>(ref[i].size(), 0.0f)), 0.0)
          << what << ": output " << i << " is all zero (the comparison would prove nothing)";
    }
  }
}

// conv2d_backward writing both gradients (dw, then dx) of x [xs] and w [ws] from dy [ys].
inline LowCase conv_backward_case(const Shape& xs, const Shape& ws, const Shape& ys, const FrConvParams& p) {
  LowCase b{{{ys, Fill::RANDOM, true},
             {xs, Fill::RANDOM, true},
             {ws, Fill::RANDOM, true},
             {ws, Fill::ZERO, true},
             {xs, Fill::ZERO, true}},
            node(FR_OP_CONV2D_BACKWARD, {0, 1, 2}, {3, 4}),
            {3, 4}};
  b.node.with_params(FrConvBackwardParams{p, 1, 0});
  return b;
}

// conv2d's sums output (k sums, then k sums of squares) against the sums of y as stored, in double: each sum
// within 1e-5 of its channel's sum of |y|, each sum of squares within 1e-5 of itself, plus `floor`.
inline void expect_sums_of_stored(const std::vector<float>& y, const std::vector<float>& sums, int64_t k,
                                  double floor, const std::string& what) {
  std::vector<double> yd(y.begin(), y.end()), mag(y.size());
  for (size_t i = 0; i < yd.size(); ++i) mag[i] = std::fabs(yd[i]);
  const std::vector<double> want = ref::channel_sums(yd, k), abs_sums = ref::channel_sums(mag, k);
  const auto n = static_cast<size_t>(k);
  for (size_t c = 0; c < n; ++c) {
    EXPECT_NEAR(sums[c], want[c], 1e-5 * abs_sums[c] + floor) << what << " channel " << c;
    EXPECT_NEAR(sums[n + c], want[n + c], 1e-5 * want[n + c] + floor) << what << " channel " << c;
  }
}

}  // namespace fresco::gpu_test
