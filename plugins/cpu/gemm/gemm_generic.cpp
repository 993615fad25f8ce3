// Portable sgemm micro-kernel (4 x 8 tile, plain C++ loops the compiler may vectorise for the baseline ISA),
// used when the CPU has neither AVX-512 nor AVX2+FMA; packing is the driver's scalar packers.
// Invariants: each C element is one multiply-add chain over k in order, so results do not depend on tiling or
// threads. Tested by tests/plugins/cpu/test_gemm.cpp (kernel kGeneric against a double reference).
#include "gemm.h"

namespace fresco::cpu::detail {
namespace {

constexpr int kMr = 4;
constexpr int kNr = 8;

template <bool kFull>
void tile_impl(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc, int rows,
               int cols, float alpha, float beta, bool first) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < kc; ++p, a += kMr, b += b_stride) {
    float bv[kNr];
    for (int j = 0; j < kNr; ++j) bv[j] = (kFull || j < cols) ? b[j] : 0.0f;
    for (int i = 0; i < kMr; ++i) {
      const float av = a[i];
      for (int j = 0; j < kNr; ++j) acc[i][j] += av * bv[j];
    }
  }
  const bool read_c = !(first && beta == 0.0f);
  for (int i = 0; i < rows; ++i) {
    float* cr = c + i * ldc;
    for (int j = 0; j < cols; ++j) {
      const float prod = alpha * acc[i][j];
      cr[j] = read_c ? prod + (first ? beta * cr[j] : cr[j]) : prod;
    }
  }
}

void tile(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc, int rows,
          int cols, float alpha, float beta, bool first) {
  if (cols == kNr) {
    tile_impl<true>(kc, a, b, b_stride, c, ldc, rows, cols, alpha, beta, first);
  } else {
    tile_impl<false>(kc, a, b, b_stride, c, ldc, rows, cols, alpha, beta, first);
  }
}

}  // namespace

const GemmMicroKernel kGemmGeneric = {"generic", kMr, kNr, nullptr, nullptr, &tile};

}  // namespace fresco::cpu::detail
