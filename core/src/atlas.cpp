// GraphAtlas assignment and (graph, GraphId, ShapeId) deduplication.
#include "fresco/core/atlas.h"

namespace fresco {

const char* variant_name(Variant v) noexcept {
  constexpr const char* names[kVariantCount] = {"train_base",        "train_last", "train_lowres",
                                                "train_lowres_last", "val_base",   "val_last"};
  int i = static_cast<int>(v);
  return i >= 0 && i < kVariantCount ? names[i] : "?";
}

void GraphAtlas::assign(Variant v, const ComputationGraph* graph, const MemoryPlan* plan,
                        ShapeId input_shape) {
  present_[static_cast<int>(v)] = true;
  for (int g = 0; g < kGraphIdCount; ++g) {
    const auto gid = static_cast<GraphId>(g);
    AtlasSlot& s = slots_[static_cast<int>(v)][g];
    s = AtlasSlot{};
    if (graph->empty(gid)) continue;
    s.graph = graph;
    s.plan = plan;
    s.shape = shape_invariant(gid) ? ShapeId{} : input_shape;
    s.stream = default_stream(gid);
  }
}

void GraphAtlas::dedup() {
  unique_.clear();
  stats_ = AtlasStats{};
  for (int v = 0; v < kVariantCount; ++v) {
    if (!present_[v]) continue;
    for (int g = 0; g < kGraphIdCount; ++g) {
      AtlasSlot& s = slots_[v][g];
      if (!s.graph) continue;
      ++stats_.slots;
      s.captured_idx = -1;
      for (size_t u = 0; u < unique_.size(); ++u) {
        const AtlasSlot& r = slot(unique_[u].variant, unique_[u].gid);
        if (r.graph == s.graph && static_cast<int>(unique_[u].gid) == g && r.shape == s.shape) {
          s.captured_idx = static_cast<int32_t>(u);
          ++stats_.reused;
          break;
        }
      }
      if (s.captured_idx < 0) {
        s.captured_idx = static_cast<int32_t>(unique_.size());
        unique_.push_back({static_cast<Variant>(v), static_cast<GraphId>(g)});
      }
    }
  }
  stats_.unique = static_cast<int>(unique_.size());
}

}  // namespace fresco
