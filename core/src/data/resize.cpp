// Area resampling (data/resize.h).
#include "fresco/core/data/resize.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "fresco/core/error.h"

namespace fresco::data {

// Output pixel i covers [i in, (i + 1) in) and input pixel j [j out, (j + 1) out), both in units of
// 1 / out of an input pixel: the overlap is an integer (its weight overlap / in), and an output pixel's
// overlaps add up to in.
void AreaResize::plan_axis(int64_t in, int64_t out, std::vector<Taps>& taps, std::vector<int64_t>& w) {
  for (int64_t i = 0; i < out; ++i) {
    const int64_t lo = i * in, hi = (i + 1) * in;
    Taps t;
    t.first = static_cast<int32_t>(lo / out);
    t.at = static_cast<int32_t>(w.size());
    for (int64_t j = t.first; j < in && j * out < hi; ++j) {
      const int64_t overlap = std::min(hi, (j + 1) * out) - std::max(lo, j * out);
      if (overlap <= 0) continue;
      w.push_back(overlap);
      ++t.count;
    }
    taps.push_back(t);
  }
}

AreaResize::AreaResize(int64_t in_h, int64_t in_w, int64_t out_h, int64_t out_w)
    : in_h_(in_h), in_w_(in_w), out_h_(out_h), out_w_(out_w) {
  FRESCO_CHECK(in_h >= 1 && in_w >= 1 && out_h >= 1 && out_w >= 1 && out_h <= in_h && out_w <= in_w &&
                   in_h <= (int64_t{1} << 20) && in_w <= (int64_t{1} << 20),
               ErrorCode::kBadConfig,
               "resize: " + std::to_string(in_w) + "x" + std::to_string(in_h) + " to " +
                   std::to_string(out_w) + "x" + std::to_string(out_h) +
                   ": each side must be at least 1 and at most the input's");
  rows_.reserve(static_cast<size_t>(out_h));
  cols_.reserve(static_cast<size_t>(out_w));
  plan_axis(in_h, out_h, rows_, w_);
  plan_axis(in_w, out_w, cols_, w_);
}

void AreaResize::apply(const uint8_t* src, uint8_t* dst, int64_t c) const {
  FRESCO_CHECK(out_h_ > 0 && c >= 1, ErrorCode::kInternal, "resize: an empty plan or no channels");
  if (identity()) {
    std::memcpy(dst, src, static_cast<size_t>(in_h_ * in_w_ * c));
    return;
  }
  const int64_t den = in_h_ * in_w_;  // the weights' sum
  for (int64_t y = 0; y < out_h_; ++y) {
    const Taps& r = rows_[static_cast<size_t>(y)];
    for (int64_t x = 0; x < out_w_; ++x) {
      const Taps& q = cols_[static_cast<size_t>(x)];
      for (int64_t k = 0; k < c; ++k) {
        int64_t sum = 0;  // at most 255 in_h in_w (< 2^48)
        for (int32_t a = 0; a < r.count; ++a) {
          const uint8_t* row = src + ((r.first + a) * in_w_ + q.first) * c + k;
          int64_t across = 0;
          for (int32_t b = 0; b < q.count; ++b) across += w_[static_cast<size_t>(q.at + b)] * row[b * c];
          sum += w_[static_cast<size_t>(r.at + a)] * across;
        }
        dst[(y * out_w_ + x) * c + k] = static_cast<uint8_t>((2 * sum + den) / (2 * den));  // half up
      }
    }
  }
}

}  // namespace fresco::data
