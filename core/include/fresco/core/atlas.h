// GraphAtlas: a fixed array [variant][GraphId] of slots {graph, plan, ShapeId, stream, captured_idx}.
// Invariant: two slots share a capture iff (graph, GraphId, ShapeId) are equal; shape-invariant graphs use
// ShapeId{0,0,0,0} and so are captured once across variants. Lookups are array reads. Tested by
// test_graph_atlas.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "fresco/core/graph.h"
#include "fresco/core/memory_plan.h"

namespace fresco {

enum class Variant : uint8_t {
  TRAIN_BASE,
  TRAIN_LAST,
  TRAIN_LOWRES,
  TRAIN_LOWRES_LAST,
  VAL_BASE,
  VAL_LAST,
  COUNT
};
constexpr int kVariantCount = static_cast<int>(Variant::COUNT);
const char* variant_name(Variant v) noexcept;
inline bool is_train(Variant v) noexcept {
  return v <= Variant::TRAIN_LOWRES_LAST;
}

struct ShapeId {
  int32_t n = 0, h = 0, w = 0, c = 0;
  bool operator==(const ShapeId&) const = default;
  bool zero() const noexcept { return n == 0 && h == 0 && w == 0 && c == 0; }
};

struct AtlasSlot {
  const ComputationGraph* graph = nullptr;
  const MemoryPlan* plan = nullptr;
  ShapeId shape;
  StreamRole stream = StreamRole::COMP_1;
  int32_t captured_idx = -1;  // index into the unique captures; -1 = empty (nothing to launch)
};

struct AtlasStats {
  int slots = 0;   // non-empty slots
  int unique = 0;  // distinct captures
  int reused = 0;  // slots that share a capture with an earlier slot
};

class GraphAtlas {
 public:
  // Fills every slot of a present variant: non-empty GraphIds get graph/plan/shape; then deduplicates.
  void assign(Variant v, const ComputationGraph* train_or_inference, const MemoryPlan* plan,
              ShapeId input_shape);
  // Computes captured_idx for every slot; the unique list lists one representative slot per capture.
  void dedup();
  const AtlasSlot& slot(Variant v, GraphId g) const noexcept {
    return slots_[static_cast<int>(v)][static_cast<int>(g)];
  }
  bool present(Variant v) const noexcept { return present_[static_cast<int>(v)]; }
  struct Unique {
    Variant variant;
    GraphId gid;
  };
  const std::vector<Unique>& unique() const noexcept { return unique_; }
  AtlasStats stats() const noexcept { return stats_; }

 private:
  std::array<std::array<AtlasSlot, kGraphIdCount>, kVariantCount> slots_{};
  std::array<bool, kVariantCount> present_{};
  std::vector<Unique> unique_;
  AtlasStats stats_;
};

}  // namespace fresco
