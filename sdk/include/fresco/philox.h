/* Philox-4x32-10 (Salmon et al., SC'11): the one counter-based generator of fresco, usable from C, C++ and
 * CUDA. A draw is a pure function of (key = seed, counter = {index, index_hi, purpose/layer, step or epoch}),
 * so results do not depend on thread count or backend. Tested against the Random123 known-answer vectors in
 * tests/core/test_philox.cpp. */
#ifndef FRESCO_PHILOX_H_
#define FRESCO_PHILOX_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define FR_HD static inline __host__ __device__
#else
#define FR_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct FrPhilox4 {
  uint32_t v[4];
} FrPhilox4;

FR_HD uint32_t fr_mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

/* Ten rounds of Philox-4x32 on counter c with key (k0, k1). */
FR_HD FrPhilox4 fr_philox4x32(FrPhilox4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = fr_mulhilo32(0xD2511F53u, c.v[0], &hi0);
    uint32_t lo1 = fr_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
    FrPhilox4 n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

/* Uniform float in [0, 1) from 24 random bits. */
FR_HD float fr_u01(uint32_t x) {
  return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* Four uniforms for element group `index` of stream (purpose, sub) at time `tick` under `seed`. */
FR_HD FrPhilox4 fr_draw4(uint64_t seed, uint32_t purpose, uint32_t sub, uint32_t tick, uint64_t index) {
  FrPhilox4 c;
  c.v[0] = (uint32_t)index;
  c.v[1] = (uint32_t)(index >> 32);
  c.v[2] = (purpose << 24) ^ sub;
  c.v[3] = tick;
  return fr_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FRESCO_PHILOX_H_ */
