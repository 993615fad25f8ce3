// Host-side training augmentation (augment.h): Philox draws per (seed, epoch, sample), crop with zero fill
// and horizontal flip in one pass over the output image.
#include "fresco/core/data/augment.h"

#include <cstring>

#include "fresco/ops.h"
#include "fresco/philox.h"

namespace fresco::data {

AugmentDraw augment_draw(const Augmentation& a, uint64_t seed, uint32_t epoch, uint32_t sample) {
  const FrPhilox4 r = fr_draw4(seed, FR_RNG_AUGMENT, 0, epoch, sample);
  AugmentDraw d;
  if (a.crop_pad > 0) {
    const uint32_t span = 2u * static_cast<uint32_t>(a.crop_pad) + 1u;
    d.dy = static_cast<int32_t>(r.v[0] % span) - a.crop_pad;
    d.dx = static_cast<int32_t>(r.v[1] % span) - a.crop_pad;
  }
  d.flip = a.flip && (r.v[2] & 1u);
  return d;
}

void augment_image(const uint8_t* src, uint8_t* dst, int64_t h, int64_t w, int64_t c, const AugmentDraw& d) {
  for (int64_t y = 0; y < h; ++y) {
    const int64_t sy = y + d.dy;
    uint8_t* row = dst + y * w * c;
    if (sy < 0 || sy >= h) {
      std::memset(row, 0, static_cast<size_t>(w * c));
      continue;
    }
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sx = (d.flip ? w - 1 - x : x) + d.dx;
      uint8_t* px = row + x * c;
      if (sx < 0 || sx >= w)
        std::memset(px, 0, static_cast<size_t>(c));
      else
        std::memcpy(px, src + (sy * w + sx) * c, static_cast<size_t>(c));
    }
  }
}

}  // namespace fresco::data
