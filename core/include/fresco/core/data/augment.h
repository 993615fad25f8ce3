// Training-time augmentation applied while a batch is staged on the host (so CPU and GPU runs see the same
// bytes): random crop with zero padding (PyTorch RandomCrop(size, padding=pad)), random horizontal flip
// (p = 0.5), then Cutout (DeVries & Taylor 2017: a square of `cutout` pixels around a uniformly drawn
// centre, clipped at the borders, set to the normalisation's mean, which the device's normalisation maps to
// about 0, as the original masks the normalised image). Every draw is a pure function of (seed, epoch, sample
// index) through Philox (purpose FR_RNG_AUGMENT), so augmentation is reproducible on any thread count and
// backend. Tested by tests/core/test_augment.cpp.
#pragma once

#include <array>
#include <cstdint>

namespace fresco::data {

struct Augmentation {
  int32_t crop_pad = 0;  // 0: no crop; else shifts in [-pad, pad] with zero fill
  bool flip = false;     // horizontal flip with probability 0.5
  int32_t cutout = 0;    // 0: none; else the side of the square set to cutout_fill
  // per channel (up to 4, as the normalisation; a fifth and later take the fourth's): round(255 mean),
  // which DeepLearningTask sets
  std::array<uint8_t, 4> cutout_fill{};
  bool active() const noexcept { return crop_pad > 0 || flip || cutout > 0; }
};

struct AugmentDraw {
  int32_t dy = 0, dx = 0;  // the crop window's offset from the centred one
  bool flip = false;
  int32_t cutout = 0;   // the square's side (0: none)
  uint32_t cut_at = 0;  // its centre: row (low 16 bits) and column (high 16 bits), each modulo the size
  std::array<uint8_t, 4> fill{};
};

// The draw for `sample` in `epoch` under `seed`.
AugmentDraw augment_draw(const Augmentation& a, uint64_t seed, uint32_t epoch, uint32_t sample);

// dst (h x w x c bytes) = src shifted by the draw (pixels from outside the image are 0), then mirrored, then
// the cutout square filled.
void augment_image(const uint8_t* src, uint8_t* dst, int64_t h, int64_t w, int64_t c, const AugmentDraw& d);

}  // namespace fresco::data
