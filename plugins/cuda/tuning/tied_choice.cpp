// tied_choice (tied_choice.h).
#include "tuning/tied_choice.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace fresco::cuda {

int tied_choice(const std::vector<float>& us, const std::vector<int>& splits, float tie) {
  auto measured = [](float t) { return std::isfinite(t) && t > 0.0f; };
  float fastest = std::numeric_limits<float>::infinity();
  for (float t : us)
    if (measured(t)) fastest = std::min(fastest, t);
  const float limit = fastest * (1.0f + std::max(tie, 0.0f));
  int pick = -1;
  for (size_t i = 0; i < us.size(); ++i) {
    if (!measured(us[i]) || us[i] > limit) continue;
    const auto p = static_cast<size_t>(pick);
    if (pick < 0 || splits[i] < splits[p] || (splits[i] == splits[p] && us[i] < us[p]))
      pick = static_cast<int>(i);
  }
  return pick;
}

}  // namespace fresco::cuda
