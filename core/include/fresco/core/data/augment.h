// Training-time augmentation applied while a batch is staged on the host (so CPU and GPU runs see the same
// bytes): random crop with zero padding (PyTorch RandomCrop(size, padding=pad)) and random horizontal flip
// (p = 0.5). Every draw is a pure function of (seed, epoch, sample index) through Philox (purpose
// FR_RNG_AUGMENT), so augmentation is reproducible on any thread count and backend. Tested by
// tests/core/test_augment.cpp.
#pragma once

#include <cstdint>

namespace fresco::data {

struct Augmentation {
  int32_t crop_pad = 0;  // 0: no crop; else shifts in [-pad, pad] with zero fill
  bool flip = false;     // horizontal flip with probability 0.5
  bool active() const noexcept { return crop_pad > 0 || flip; }
};

struct AugmentDraw {
  int32_t dy = 0, dx = 0;  // the crop window's offset from the centred one
  bool flip = false;
};

// The draw for `sample` in `epoch` under `seed`.
AugmentDraw augment_draw(const Augmentation& a, uint64_t seed, uint32_t epoch, uint32_t sample);

// dst (h x w x c bytes) = src shifted by the draw (pixels from outside the image are 0), then mirrored.
void augment_image(const uint8_t* src, uint8_t* dst, int64_t h, int64_t w, int64_t c, const AugmentDraw& d);

}  // namespace fresco::data
