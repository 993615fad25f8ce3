// GraphId names, default streams, shape invariance; ComputationGraph storage.
#include "fresco/core/graph.h"

#include <algorithm>

#include "fresco/core/error.h"

namespace fresco {

const char* graph_id_name(GraphId g) noexcept {
  constexpr const char* names[kGraphIdCount] = {"TRANSFER_A",
                                                "TRANSFER_B",
                                                "FIRST_LAYER_FWD_A",
                                                "FIRST_LAYER_FWD_B",
                                                "DEEP_FWD_BWD",
                                                "FIRST_LAYER_BWD_A",
                                                "FIRST_LAYER_BWD_B",
                                                "ZERO_GRAD",
                                                "FIRST_COMM",
                                                "DEEP_COMM",
                                                "STATS_COMM",
                                                "GRAD_CAST",
                                                "NAN_CHECK_AND_GRAD_SCALING",
                                                "UPDATE_STATS",
                                                "OPTIMIZER",
                                                "LARS_NORMS",
                                                "LARS_UPDATE",
                                                "EMA_UPDATE",
                                                "INF_MAIN_A",
                                                "INF_MAIN_B",
                                                "INF_EMA_A",
                                                "INF_EMA_B",
                                                "WEIGHT_CAST",
                                                "ACCUM_METRICS",
                                                "ACCUM_METRICS_TRAIN_LAST",
                                                "ACCUM_METRICS_VAL_LAST",
                                                "CLEAR_METRICS",
                                                "VAL_RESULT_COMM",
                                                "UPDATE_BN_INF_PARAMS",
                                                "STEP_END"};
  int i = static_cast<int>(g);
  return i >= 0 && i < kGraphIdCount ? names[i] : "?";
}

StreamRole default_stream(GraphId g) noexcept {
  switch (g) {
    case GraphId::TRANSFER_A:
    case GraphId::TRANSFER_B:
      return StreamRole::TRANS;
    case GraphId::FIRST_LAYER_BWD_A:
    case GraphId::FIRST_LAYER_BWD_B:
    case GraphId::FIRST_COMM:
      return StreamRole::COMP_2;
    case GraphId::DEEP_COMM:
    case GraphId::STATS_COMM:
    case GraphId::VAL_RESULT_COMM:
      return StreamRole::COMP_3;
    case GraphId::OPTIMIZER:
    case GraphId::LARS_NORMS:
    case GraphId::LARS_UPDATE:
    case GraphId::EMA_UPDATE:
    case GraphId::WEIGHT_CAST:
    case GraphId::ZERO_GRAD:
    case GraphId::GRAD_CAST:
    case GraphId::NAN_CHECK_AND_GRAD_SCALING:
    case GraphId::STEP_END:
      return StreamRole::UPDATE;
    default:
      return StreamRole::COMP_1;
  }
}

bool in_whole_step(GraphId g) noexcept {
  switch (g) {
    case GraphId::FIRST_LAYER_FWD_A:
    case GraphId::FIRST_LAYER_FWD_B:
    case GraphId::DEEP_FWD_BWD:
    case GraphId::ACCUM_METRICS:
    case GraphId::FIRST_LAYER_BWD_A:
    case GraphId::FIRST_LAYER_BWD_B:
    case GraphId::GRAD_CAST:
    case GraphId::DEEP_COMM:
    case GraphId::NAN_CHECK_AND_GRAD_SCALING:
    case GraphId::STEP_END:
    case GraphId::OPTIMIZER:
    case GraphId::WEIGHT_CAST:
      return true;
    default:
      return false;
  }
}

bool shape_invariant(GraphId g) noexcept {
  switch (g) {
    case GraphId::ZERO_GRAD:
    case GraphId::FIRST_COMM:
    case GraphId::DEEP_COMM:
    case GraphId::STATS_COMM:
    case GraphId::GRAD_CAST:
    case GraphId::NAN_CHECK_AND_GRAD_SCALING:
    case GraphId::OPTIMIZER:
    case GraphId::LARS_NORMS:
    case GraphId::LARS_UPDATE:
    case GraphId::EMA_UPDATE:
    case GraphId::WEIGHT_CAST:
    case GraphId::ACCUM_METRICS:
    case GraphId::ACCUM_METRICS_TRAIN_LAST:
    case GraphId::ACCUM_METRICS_VAL_LAST:
    case GraphId::CLEAR_METRICS:
    case GraphId::VAL_RESULT_COMM:
    case GraphId::UPDATE_BN_INF_PARAMS:
    case GraphId::STEP_END:
      return true;
    default:
      return false;
  }
}

GraphNode& ComputationGraph::add(GraphId g, GraphNode n) {
  FRESCO_CHECK(
      static_cast<int>(g) < kGraphIdCount, ErrorCode::kUsage,
      "ComputationGraph::add: graph id " + std::to_string(static_cast<int>(g)) + " is not a GraphId");
  auto& part = parts_[static_cast<int>(g)];
  part.push_back(std::move(n));
  return part.back();
}

size_t ComputationGraph::node_count() const noexcept {
  size_t n = 0;
  for (const auto& p : parts_) n += p.size();
  return n;
}

RegionSpan range_bytes(const RangeRef& r, const MemoryPlan& p, const std::string& what) {
  FRESCO_CHECK(r.first <= r.last && static_cast<int>(r.last) < kRegionCount, ErrorCode::kUsage,
               what + ": a range from region " + region_name(r.first) + " to " + region_name(r.last) +
                   " (the first must not come after the last)");
  const RegionSpan s = p.region_range(r.first, r.last);
  const uint64_t take = r.take < 0 ? s.bytes - std::min(r.skip, s.bytes) : static_cast<uint64_t>(r.take);
  FRESCO_CHECK(r.skip <= s.bytes && take <= s.bytes - r.skip, ErrorCode::kUsage,
               what + ": range part [" + std::to_string(r.skip) + ", +" + std::to_string(take) +
                   ") lies outside its regions (" + std::to_string(s.bytes) + " bytes)");
  return {s.offset + r.skip, take};
}

}  // namespace fresco
