// Host-side training augmentation (augment.h): Philox draws per (seed, epoch, sample), crop with zero fill
// and horizontal flip in one pass over the output image.
#include "fresco/core/data/augment.h"

#include <algorithm>
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
  if (a.cutout > 0) {
    d.cutout = a.cutout;
    d.cut_at = r.v[3];
    d.fill = a.cutout_fill;
  }
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
  if (d.cutout <= 0) return;
  // the original's square: rows [cy - side/2, cy + side/2) clipped to the image, the same for columns
  const int64_t cy = static_cast<int64_t>(d.cut_at & 0xffffu) % h,
                cx = static_cast<int64_t>(d.cut_at >> 16) % w;
  const int64_t y0 = std::max<int64_t>(0, cy - d.cutout / 2), y1 = std::min<int64_t>(h, cy + d.cutout / 2);
  const int64_t x0 = std::max<int64_t>(0, cx - d.cutout / 2), x1 = std::min<int64_t>(w, cx + d.cutout / 2);
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x)
      for (int64_t k = 0; k < c; ++k) dst[(y * w + x) * c + k] = d.fill[static_cast<size_t>(k < 4 ? k : 3)];
}

}  // namespace fresco::data
