// AVX2 + FMA micro-kernels for sgemm: a 6 x 16 register tile (12 ymm accumulators; A broadcast, B two ymm
// loads) with an instantiation for every edge shape; packing is the driver's scalar packers.
// Invariants: instructions enabled per function (the library still loads on any x86-64; the driver calls
// these only on CPUs with avx2 + fma); each C element is one FMA chain over k in order, whatever the tile
// shape. Tested by tests/plugins/cpu/test_gemm.cpp (kernel kAvx2 against a double reference).
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <utility>

#include "gemm.h"

#define FRESCO_AVX2 __attribute__((target("avx2,fma")))

namespace fresco::cpu::detail {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

// Lanes [0, count) set, for maskload / maskstore.
FRESCO_AVX2 inline __m256i lane_mask(int count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), idx);
}

// R rows (1..6) by V ymm columns (1..2); with kFull the last vector is whole, else masked to `cols`.
template <int R, int V, bool kFull>
FRESCO_AVX2 void tile_rv(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc,
                         int cols, float alpha, float beta, bool first) {
  __m256 acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_ps();
  }
  const __m256i last = lane_mask(cols - 8 * (V - 1));
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[V];
    if constexpr (V == 2) bv[0] = _mm256_loadu_ps(b);
    if constexpr (kFull) {
      bv[V - 1] = _mm256_loadu_ps(b + 8 * (V - 1));
    } else {
      bv[V - 1] = _mm256_maskload_ps(b + 8 * (V - 1), last);
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += kMr;
    b += b_stride;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const bool read_c = !(first && beta == 0.0f);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* cp = c + i * ldc + 8 * v;
      const bool whole = kFull || v < V - 1;
      __m256 r;
      if (read_c) {
        __m256 old = whole ? _mm256_loadu_ps(cp) : _mm256_maskload_ps(cp, last);
        if (first) old = _mm256_mul_ps(vb, old);
        r = _mm256_fmadd_ps(va, acc[i][v], old);
      } else {
        r = _mm256_mul_ps(va, acc[i][v]);
      }
      if (whole) {
        _mm256_storeu_ps(cp, r);
      } else {
        _mm256_maskstore_ps(cp, last, r);
      }
    }
  }
}

using TileFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int, float, float,
                        bool);

// kTiles[rows - 1][vectors - 1][full]
template <std::size_t... I>
constexpr std::array<std::array<std::array<TileFn, 2>, 2>, sizeof...(I)> make_tiles(
    std::index_sequence<I...>) {
  return {
      {{{{{&tile_rv<static_cast<int>(I) + 1, 1, false>, &tile_rv<static_cast<int>(I) + 1, 1, true>}},
         {{&tile_rv<static_cast<int>(I) + 1, 2, false>, &tile_rv<static_cast<int>(I) + 1, 2, true>}}}}...}};
}
constexpr auto kTiles = make_tiles(std::make_index_sequence<kMr>{});

FRESCO_AVX2 void tile(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc,
                      int rows, int cols, float alpha, float beta, bool first) {
  const int vectors = cols > 8 ? 2 : 1;
  const bool full = cols == 8 * vectors;
  kTiles[rows - 1][vectors - 1][full ? 1 : 0](kc, a, b, b_stride, c, ldc, cols, alpha, beta, first);
}

}  // namespace

const GemmMicroKernel kGemmAvx2 = {"avx2", kMr, kNr, nullptr, nullptr, &tile};

}  // namespace fresco::cpu::detail

#else  // not x86: never selected (gemm_kernel_supported is false), defined so the table links everywhere

#include "gemm.h"

namespace fresco::cpu::detail {
const GemmMicroKernel kGemmAvx2 = {"avx2", 6, 16, nullptr, nullptr, nullptr};
}  // namespace fresco::cpu::detail

#endif
