// The choice among timed candidates (plain C++, no CUDA, so its test runs without a GPU): among the
// candidates within `tie` (a fraction) of the fastest measured time, the one of the lowest rank, then the
// fastest, then the first. Used by the matmul search (ops/matmul_search.cu; rank: the split-K slices), where
// candidates that close are reordered by timing them again, and where a split-K configuration costs more
// beside the step's other GEMMs than alone (docs/decisions.md), and by the convolution engine search with
// FRESCO_CUDNN_TIE_BREAK (ops/conv_engine.cpp; rank: the negated thread-block cluster size). Test:
// tests/plugins/cuda/tuning/test_tied_choice.cpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace fresco::cuda {

// us[i]: candidate i's time (<= 0, NaN or infinite: it was not measured); splits[i]: its rank (the matmul
// search's split-K slices, 1: none; same size as us). A negative tie counts as 0. Returns -1 when no
// candidate was measured.
int tied_choice(const std::vector<float>& us, const std::vector<int>& splits, float tie);

// cuDNN's knob types TILE_CGA_M and TILE_CGA_N (cudnnBackendKnobType_t; ops/conv_engine.cpp checks them
// against cudnn_graph.h).
constexpr int kKnobTileCgaM = 27, kKnobTileCgaN = 28;

// The thread-block cluster an engine configuration launches, from its knob choices ((type, value) pairs):
// TILE_CGA_M x TILE_CGA_N, 1 without them. A cluster's CTAs share their operand loads (TMA multicast), so of
// engines equally fast alone the larger cluster moves fewer bytes through L2 beside concurrent kernels.
int64_t cluster_size(const std::vector<std::pair<int, int64_t>>& knobs);

}  // namespace fresco::cuda
