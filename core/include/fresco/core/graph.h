// ComputationGraph: zero-shape nodes (op name + tensor ids + region ranges + POD params), split into
// GraphIds. Invariant: nodes hold no shapes, dtypes or pointers; those come from a MemoryPlan at capture
// time, so one graph serves every variant of the same topology. Tested by test_graph_atlas.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fresco/core/memory_plan.h"

namespace fresco {

enum class GraphId : uint8_t {
  TRANSFER_A,
  TRANSFER_B,
  FIRST_LAYER_FWD_A,
  FIRST_LAYER_FWD_B,
  DEEP_FWD_BWD,
  FIRST_LAYER_BWD_A,
  FIRST_LAYER_BWD_B,
  ZERO_GRAD,
  FIRST_COMM,
  DEEP_COMM,
  STATS_COMM,
  GRAD_CAST,
  NAN_CHECK_AND_GRAD_SCALING,
  UPDATE_STATS,
  OPTIMIZER,
  LARS_NORMS,
  LARS_UPDATE,
  EMA_UPDATE,
  INF_MAIN_A,
  INF_MAIN_B,
  INF_EMA_A,
  INF_EMA_B,
  WEIGHT_CAST,
  ACCUM_METRICS,
  ACCUM_METRICS_TRAIN_LAST,
  ACCUM_METRICS_VAL_LAST,
  CLEAR_METRICS,
  VAL_RESULT_COMM,
  UPDATE_BN_INF_PARAMS,
  // CompileOptions::deferred_update: the end of a step whose update runs at the start of the next one (the
  // step scalars kept for it, the loss scale's update, step_done); empty otherwise (OPTIMIZER holds them).
  STEP_END,
  COUNT
};
constexpr int kGraphIdCount = static_cast<int>(GraphId::COUNT);

enum class StreamRole : uint8_t { TRANS, COMP_1, COMP_2, COMP_3, UPDATE, COUNT };
constexpr int kStreamCount = static_cast<int>(StreamRole::COUNT);

const char* graph_id_name(GraphId g) noexcept;
StreamRole default_stream(GraphId g) noexcept;
// Graphs whose nodes touch only shape-invariant ranges (optimizer, casts, comm, metrics): captured once.
bool shape_invariant(GraphId g) noexcept;
// Graphs a whole-step capture may hold (the Executor's training steps; Runtime::fuse takes no other, and
// pre_capture sizes the fused stream's workspace for their calls only).
bool in_whole_step(GraphId g) noexcept;

enum class NodeKind : uint8_t { COMPUTE, RANGE };

// A range operand: a contiguous span of regions [first, last], one tensor's slot, or a host staging buffer.
struct RangeRef {
  enum class Kind : uint8_t { REGIONS, TENSOR, STAGING } kind = Kind::REGIONS;
  Region first = Region::T_TEMP, last = Region::T_TEMP;
  TensorId tensor = kNoTensor;
  char staging = 'A';
  DType dtype = DType::F32;
  // REGIONS only: a part of the regions' byte span, `skip` bytes in and `take` bytes long (-1: to the end).
  // Parallel families (W, G, M, V) have the same layout, so one part names the same tensors in each.
  uint64_t skip = 0;
  int64_t take = -1;
  bool values_only = false;  // TENSOR: values_of

  static RangeRef regions(Region a, Region b, DType t = DType::F32) {
    return {Kind::REGIONS, a, b, kNoTensor, 'A', t};
  }
  static RangeRef part(Region a, Region b, uint64_t skip, int64_t take, DType t = DType::F32) {
    RangeRef r = regions(a, b, t);
    r.skip = skip;
    r.take = take;
    return r;
  }
  // A tensor's whole slot (TENSOR: FrRange::bytes is its slot_bytes, which may be padded past its values).
  static RangeRef of(TensorId id, DType t) {
    return {Kind::TENSOR, Region::T_TEMP, Region::T_TEMP, id, 'A', t};
  }
  // A tensor's values only (FrRange::bytes = its elements times their size): for a table whose length the
  // kernel takes from the range (a scheduler's momenta: a step past its end takes the last value, not the
  // slot's padding).
  static RangeRef values_of(TensorId id, DType t) {
    RangeRef r = of(id, t);
    r.values_only = true;
    return r;
  }
  static RangeRef staging_buffer(char ab) {
    return {Kind::STAGING, Region::T_TEMP, Region::T_TEMP, kNoTensor, ab, DType::U8};
  }
};

// The arena bytes a REGIONS operand covers in plan p: its regions' span narrowed to its part [skip, +take).
// A part outside the span is a kInternal error naming `what`.
RegionSpan range_bytes(const RangeRef& r, const MemoryPlan& p, const std::string& what);

struct GraphNode {
  NodeKind kind = NodeKind::COMPUTE;
  std::string op;
  std::vector<TensorId> in, out;
  std::vector<RangeRef> rin, rout;
  std::vector<uint8_t> params;
  std::string label;         // for logs and DOT output: which layer emitted it
  bool side_stream = false;  // may run on the side stream of its graph (joined before the optimizer)
  bool join_side = false;    // the main stream waits for all side-stream work issued so far before this node
  // With join_side: wait only for the side work issued before the previous join, so the side work issued
  // since (one conv's weight gradient) may still run beside this node (CompileOptions::conv_join_lag_max).
  bool join_lag = false;
  // With side_stream: on a stream of its own (the update stream), forked from the main stream just before
  // it and joined only where a graph outside the backward pieces starts (and at the end of a capture), so
  // the backward's joins never wait for it (CompileOptions::early_update_parts). Range ops only.
  bool detached = false;
  // The main stream waits here for the update stream's work issued so far (the previous step's deferred
  // update, CompileOptions::deferred_update): set on the first node of the step that touches its bytes.
  bool join_update = false;

  template <class P>
  GraphNode& with_params(const P& p) {
    params.resize(sizeof(P));
    std::memcpy(params.data(), &p, sizeof(P));
    return *this;
  }
  // The params as P, or none when they are not a P's size.
  template <class P>
  std::optional<P> params_as() const {
    if (params.size() != sizeof(P)) return std::nullopt;
    P p;
    std::memcpy(&p, params.data(), sizeof(P));
    return p;
  }
};

class ComputationGraph {
 public:
  enum class Kind : uint8_t { TRAIN, INFERENCE };
  explicit ComputationGraph(Kind k) : kind_(k) {}
  Kind kind() const noexcept { return kind_; }
  GraphNode& add(GraphId g, GraphNode n);
  const std::vector<GraphNode>& nodes(GraphId g) const noexcept { return parts_[static_cast<int>(g)]; }
  // For the compiler's passes that reorder a graph's nodes.
  std::vector<GraphNode>& mutable_nodes(GraphId g) noexcept { return parts_[static_cast<int>(g)]; }
  bool empty(GraphId g) const noexcept { return parts_[static_cast<int>(g)].empty(); }
  size_t node_count() const noexcept;

 private:
  Kind kind_;
  std::array<std::vector<GraphNode>, kGraphIdCount> parts_{};
};

}  // namespace fresco
