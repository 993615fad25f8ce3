// Philox-4x32-10 (sdk/include/fresco/philox.h) against the Random123 known-answer vectors (kat_vectors,
// philox4x32 10 rounds), plus the counter layout of fr_draw4 and the range of fr_u01. A failure here means
// every initialisation, shuffle and dropout mask of fresco differs from the reference generator.
#include <gtest/gtest.h>

#include <cstdint>

#include "fresco/ops.h"
#include "fresco/philox.h"

namespace {

struct Kat {
  uint32_t ctr[4];
  uint32_t key[2];
  uint32_t expected[4];
};

constexpr Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, Random123KnownAnswers) {
  for (const Kat& k : kKats) {
    FrPhilox4 c{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}};
    const FrPhilox4 r = fr_philox4x32(c, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(r.v[i], k.expected[i])
          << std::hex << "word " << i << " for counter {0x" << k.ctr[0] << ", 0x" << k.ctr[1] << ", 0x"
          << k.ctr[2] << ", 0x" << k.ctr[3] << "} key {0x" << k.key[0] << ", 0x" << k.key[1] << "}";
    }
  }
}

TEST(Philox, MulHiLo) {
  uint32_t hi = 0;
  EXPECT_EQ(fr_mulhilo32(0xffffffffu, 0xffffffffu, &hi), 1u);
  EXPECT_EQ(hi, 0xfffffffeu);
  EXPECT_EQ(fr_mulhilo32(0xD2511F53u, 2u, &hi), 0xA4A23EA6u);
  EXPECT_EQ(hi, 1u);
}

TEST(Philox, Draw4CounterLayout) {
  // fr_draw4 is philox of counter {index lo, index hi, purpose<<24 ^ sub, tick} under key {seed lo, seed hi}.
  const uint64_t seed = 0x0123456789abcdefull;
  const uint64_t index = 0x00000002fedcba98ull;
  const FrPhilox4 c{{0xfedcba98u, 0x2u, (uint32_t{FR_RNG_SHUFFLE} << 24) ^ 7u, 11u}};
  const FrPhilox4 want = fr_philox4x32(c, 0x89abcdefu, 0x01234567u);
  const FrPhilox4 got = fr_draw4(seed, FR_RNG_SHUFFLE, 7, 11, index);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want.v[i]) << "word " << i;
  // Streams of different purposes never coincide for the same (seed, index, tick).
  const FrPhilox4 other = fr_draw4(seed, FR_RNG_DROPOUT, 7, 11, index);
  EXPECT_NE(got.v[0], other.v[0]);
}

TEST(Philox, U01Range) {
  EXPECT_EQ(fr_u01(0u), 0.0f);
  EXPECT_LT(fr_u01(0xffffffffu), 1.0f);
  EXPECT_EQ(fr_u01(0x80000000u), 0.5f);
  EXPECT_EQ(fr_u01(0xffu), 0.0f);  // only the top 24 bits count
}

}  // namespace
