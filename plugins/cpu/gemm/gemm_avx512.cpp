// AVX-512 micro-kernels for sgemm: a 12 x 32 register tile (24 zmm accumulators; A broadcast, B two zmm
// loads), an instantiation for every edge shape, and packers that transpose with 16 x 16 in-register
// transposes. Invariants: only avx512f + fma instructions, enabled per function, so the library still loads
// on any x86-64 (the driver calls these only when the CPU has them); each C element is one FMA chain over k
// in order, whatever the tile shape. Tested by tests/plugins/cpu/test_gemm.cpp (kernel kAvx512 against a
// double reference).
#if defined(__x86_64__) || defined(__i386__)
// GCC 12 warns inside its own AVX-512 intrinsics (the self-initialised _mm512_undefined_*, GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <array>
#include <cstddef>
#include <utility>

#include "gemm.h"

#define FRESCO_AVX512 __attribute__((target("avx512f,fma")))

namespace fresco::cpu::detail {
namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;

FRESCO_AVX512 inline __mmask16 low_mask(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// r[q] <- column q of the 16 x 16 matrix whose rows are r[0..15].
FRESCO_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 s[4][4];  // s[g][c], 128-bit lane L: rows 4g..4g+3 of column 4L+c
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    s[g][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    s[g][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    s[g][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    s[g][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 u0 = _mm512_shuffle_f32x4(s[0][c], s[1][c], 0x44),
                 u1 = _mm512_shuffle_f32x4(s[0][c], s[1][c], 0xEE);
    const __m512 u2 = _mm512_shuffle_f32x4(s[2][c], s[3][c], 0x44),
                 u3 = _mm512_shuffle_f32x4(s[2][c], s[3][c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
}

FRESCO_AVX512 void pack_a(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* dst) {
  if (trans) {  // op(A)[i][p] = a[p * lda + i]: one contiguous run of `rows` floats per p
    const __mmask16 m = low_mask(rows);
    for (int64_t p = 0; p < kc; ++p) {
      _mm512_mask_storeu_ps(dst + p * kMr, 0x0FFF, _mm512_maskz_loadu_ps(m, a + p * lda));
    }
    return;
  }
  // op(A)[i][p] = a[i * lda + p]: transpose 16-column blocks of the (up to) 12 rows.
  for (int64_t p0 = 0; p0 < kc; p0 += 16) {
    const int64_t w = kc - p0 < 16 ? kc - p0 : 16;
    const __mmask16 m = low_mask(w);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) {
      r[i] = i < rows ? _mm512_maskz_loadu_ps(m, a + i * lda + p0) : _mm512_setzero_ps();
    }
    transpose16(r);
    for (int64_t q = 0; q < w; ++q) _mm512_mask_storeu_ps(dst + (p0 + q) * kMr, 0x0FFF, r[q]);
  }
}

FRESCO_AVX512 void pack_b(const float* b, int64_t ldb, bool trans, int64_t kc, int64_t cols, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += kNr, dst += kc * kNr) {
    if (!trans) {  // op(B)[p][j] = b[p * ldb + j]
      const __mmask16 m0 = low_mask(cols - j0), m1 = low_mask(cols - j0 - 16);
      const float* src = b + j0;
      for (int64_t p = 0; p < kc; ++p, src += ldb) {
        _mm512_storeu_ps(dst + p * kNr, _mm512_maskz_loadu_ps(m0, src));
        _mm512_storeu_ps(dst + p * kNr + 16, _mm512_maskz_loadu_ps(m1, src + 16));
      }
      continue;
    }
    // op(B)[p][j] = b[j * ldb + p]: transpose 16 x 16 blocks (16 columns of op(B) by 16 values of p).
    for (int h = 0; h < 2; ++h) {
      const int64_t jb = j0 + 16 * h;
      const int64_t nrows = cols - jb < 0 ? 0 : (cols - jb > 16 ? 16 : cols - jb);
      if (nrows == 0) {
        for (int64_t p = 0; p < kc; ++p) _mm512_storeu_ps(dst + p * kNr + 16 * h, _mm512_setzero_ps());
        continue;
      }
      for (int64_t p0 = 0; p0 < kc; p0 += 16) {
        const int64_t w = kc - p0 < 16 ? kc - p0 : 16;
        const __mmask16 m = low_mask(w);
        __m512 r[16];
        for (int i = 0; i < 16; ++i) {
          r[i] = i < nrows ? _mm512_maskz_loadu_ps(m, b + (jb + i) * ldb + p0) : _mm512_setzero_ps();
        }
        transpose16(r);
        for (int64_t q = 0; q < w; ++q) _mm512_storeu_ps(dst + (p0 + q) * kNr + 16 * h, r[q]);
      }
    }
  }
}

// R rows (1..12) by V zmm columns (1..2); the last column vector is masked to `cols`.
template <int R, int V>
FRESCO_AVX512 void tile_rv(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c,
                           int64_t ldc, int cols, float alpha, float beta, bool first) {
  __m512 acc[R][V];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  const __mmask16 last = low_mask(cols - 16 * (V - 1));
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[V];
    if constexpr (V == 2) bv[0] = _mm512_loadu_ps(b);
    bv[V - 1] = _mm512_maskz_loadu_ps(last, b + 16 * (V - 1));
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += kMr;
    b += b_stride;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const bool read_c = !(first && beta == 0.0f);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* cp = c + i * ldc + 16 * v;
      const __mmask16 m = v == V - 1 ? last : static_cast<__mmask16>(0xFFFF);
      __m512 r;
      if (read_c) {
        __m512 old = _mm512_maskz_loadu_ps(m, cp);
        if (first) old = _mm512_mul_ps(vb, old);
        r = _mm512_fmadd_ps(va, acc[i][v], old);
      } else {
        r = _mm512_mul_ps(va, acc[i][v]);
      }
      _mm512_mask_storeu_ps(cp, m, r);
    }
  }
}

using TileFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int, float, float,
                        bool);

template <std::size_t... I>
constexpr std::array<std::array<TileFn, 2>, sizeof...(I)> make_tiles(std::index_sequence<I...>) {
  return {{{&tile_rv<static_cast<int>(I) + 1, 1>, &tile_rv<static_cast<int>(I) + 1, 2>}...}};
}
constexpr auto kTiles = make_tiles(std::make_index_sequence<kMr>{});

FRESCO_AVX512 void tile(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc,
                        int rows, int cols, float alpha, float beta, bool first) {
  kTiles[rows - 1][cols > 16 ? 1 : 0](kc, a, b, b_stride, c, ldc, cols, alpha, beta, first);
}

}  // namespace

const GemmMicroKernel kGemmAvx512 = {"avx512", kMr, kNr, &pack_a, &pack_b, &tile};

}  // namespace fresco::cpu::detail

#else  // not x86: never selected (gemm_kernel_supported is false), defined so the table links everywhere

#include "gemm.h"

namespace fresco::cpu::detail {
const GemmMicroKernel kGemmAvx512 = {"avx512", 12, 32, nullptr, nullptr, nullptr};
}  // namespace fresco::cpu::detail

#endif
