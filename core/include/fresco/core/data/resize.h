// Area resampling of a uint8 HWC image to a smaller size (progressive resolution's images, DESIGN §7): each
// output pixel is the mean of the input area it covers, [i in/out, (i + 1) in/out) on each axis, input pixels
// weighted by the fraction of them inside it (OpenCV's INTER_AREA when shrinking). The weights are exact
// fractions (integer overlaps), the sums integers, and the mean is rounded half up, so the bytes are the
// same on every machine; an integer factor gives the rounded block means. Only shrinking (or keeping the
// size, a copy). Tested by tests/core/test_resize.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace fresco::data {

class AreaResize {
 public:
  AreaResize() = default;  // 0 x 0: apply() refuses
  // in_h x in_w -> out_h x out_w, each output side in [1, the input's]: kBadConfig otherwise.
  AreaResize(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w);
  bool identity() const noexcept { return in_h_ == out_h_ && in_w_ == out_w_; }
  int64_t out_h() const noexcept { return out_h_; }
  int64_t out_w() const noexcept { return out_w_; }
  // dst (out_h x out_w x c bytes) from src (in_h x in_w x c); no allocation.
  void apply(const uint8_t* src, uint8_t* dst, int64_t c) const;

 private:
  struct Taps {
    int32_t first = 0, count = 0, at = 0;  // input pixels [first, first + count), weights from w_[at]
  };
  static void plan_axis(int64_t in, int64_t out, std::vector<Taps>& taps, std::vector<int64_t>& w);
  int64_t in_h_ = 0, in_w_ = 0, out_h_ = 0, out_w_ = 0;
  std::vector<Taps> rows_, cols_;
  std::vector<int64_t> w_;  // overlaps, in 1 / out of an input pixel
};

}  // namespace fresco::data
