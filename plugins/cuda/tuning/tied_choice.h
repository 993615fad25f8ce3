// The choice among timed candidates (plain C++, no CUDA, so its test runs without a GPU): among the
// candidates within `tie` (a fraction) of the fastest measured time, the one with the fewest split-K slices,
// then the fastest, then the first. Used by the matmul search (ops/matmul_search.cu), where candidates that
// close are reordered by timing them again, and where a split-K configuration costs more beside the step's
// other GEMMs than alone (docs/decisions.md). Test: tests/plugins/cuda/tuning/test_tied_choice.cpp.
#pragma once

#include <vector>

namespace fresco::cuda {

// us[i]: candidate i's time (<= 0, NaN or infinite: it was not measured); splits[i]: its split-K slices (1:
// none; same size as us). A negative tie counts as 0. Returns -1 when no candidate was measured.
int tied_choice(const std::vector<float>& us, const std::vector<int>& splits, float tie);

}  // namespace fresco::cuda
