// tied_choice (tied_choice.h).
#include "tuning/tied_choice.h"

#include <cstddef>
#include <limits>

namespace fresco::cuda {

int tied_choice(const std::vector<float>& us, const std::vector<int>& splits, float tie) {
  float fastest = std::numeric_limits<float>::infinity();
  for (float t : us)
    if (t > 0.0f && t < fastest) fastest = t;  // NaN compares false: skipped
  int pick = -1;
  for (size_t i = 0; i < us.size(); ++i) {
    if (!(us[i] > 0.0f) || us[i] > fastest * (1.0f + tie)) continue;
    const auto p = static_cast<size_t>(pick);
    if (pick < 0 || splits[i] < splits[p] || (splits[i] == splits[p] && us[i] < us[p]))
      pick = static_cast<int>(i);
  }
  return pick;
}

}  // namespace fresco::cuda
