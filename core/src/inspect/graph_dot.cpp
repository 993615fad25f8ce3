// graph_dot: the GraphAtlas and the train/inference ComputationGraphs as Graphviz DOT (`fresco graph`).
// Invariants: empty GraphIds and empty atlas slots are omitted; node ids are stable (atlas: s<variant>_<gid>,
// the slots of one capture chained by edges; graphs: n<gid>_<index>); an edge W -> R means R, later in step
// order (GraphIds in enum order, nodes in order), reads a tensor W writes, with A/B alternatives never
// feeding each other. Every name passes through dot_escape. Tested by tests/core/test_inspect.cpp.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "fresco/core/inspect.h"

namespace fresco {

namespace {

const char* stream_name(StreamRole s) {
  switch (s) {
    case StreamRole::TRANS:
      return "TRANS";
    case StreamRole::COMP_1:
      return "COMP_1";
    case StreamRole::COMP_2:
      return "COMP_2";
    case StreamRole::COMP_3:
      return "COMP_3";
    case StreamRole::UPDATE:
      return "UPDATE";
    case StreamRole::COUNT:
      break;
  }
  return "?";
}

// 'A' or 'B' for the GraphIds that exist once per input buffer (only one of the pair runs per step), 0 else.
char alternative(GraphId g) {
  switch (g) {
    case GraphId::TRANSFER_A:
    case GraphId::FIRST_LAYER_FWD_A:
    case GraphId::FIRST_LAYER_BWD_A:
    case GraphId::INF_MAIN_A:
    case GraphId::INF_EMA_A:
      return 'A';
    case GraphId::TRANSFER_B:
    case GraphId::FIRST_LAYER_FWD_B:
    case GraphId::FIRST_LAYER_BWD_B:
    case GraphId::INF_MAIN_B:
    case GraphId::INF_EMA_B:
      return 'B';
    default:
      return 0;
  }
}

std::string quoted(std::string_view s) {
  return "\"" + dot_escape(s) + "\"";
}

// Several escaped lines joined with DOT's centred line break.
std::string lines(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "\\n") + dot_escape(p);
  return "\"" + s + "\"";
}

const MemoryPlan* names_plan(const CompiledModel& m) {
  const auto& p = m.plans[static_cast<int>(Variant::TRAIN_BASE)];
  return p ? p.get() : nullptr;
}

std::string tensor_label(const MemoryPlan* p, TensorId id) {
  std::string s = "#" + std::to_string(id);
  if (p && id >= 0 && static_cast<size_t>(id) < p->size()) s += " " + p->tensor(id).name;
  return s;
}

std::string shape_label(const ShapeId& s) {
  if (s.zero()) return "shape-invariant";
  return "shape " + std::to_string(s.n) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w) + "x" +
         std::to_string(s.c);
}

std::string range_label(const MemoryPlan* p, const RangeRef& r) {
  switch (r.kind) {
    case RangeRef::Kind::REGIONS:
      return std::string(region_name(r.first)) +
             (r.first == r.last ? "" : std::string("..") + region_name(r.last)) + " " + dtype_name(r.dtype) +
             (r.skip == 0 && r.take < 0 ? ""
                                        : " bytes " + std::to_string(r.skip) + ".." +
                                              (r.take < 0 ? "end" : std::to_string(r.skip + r.take)));
    case RangeRef::Kind::TENSOR:
      return tensor_label(p, r.tensor);
    case RangeRef::Kind::STAGING:
      return std::string("staging ") + r.staging;
  }
  return "?";
}

struct Access {
  std::vector<TensorId> reads, writes;
};

// Tensor ids a node reads and writes: its tensor operands, RangeRef::TENSOR operands, and the tensors of the
// regions a RangeRef::REGIONS operand covers (in the base plan `p`; only those inside its part when it names
// one).
Access access_of(const GraphNode& n, const std::vector<std::vector<TensorId>>& by_region,
                 const MemoryPlan* p) {
  Access a;
  auto add = [&](std::vector<TensorId>& to, const std::vector<TensorId>& ids,
                 const std::vector<RangeRef>& refs) {
    to.insert(to.end(), ids.begin(), ids.end());
    for (const RangeRef& r : refs) {
      if (r.kind == RangeRef::Kind::TENSOR) to.push_back(r.tensor);
      if (r.kind != RangeRef::Kind::REGIONS || !p) continue;
      const RegionSpan span = range_bytes(r, *p, n.op);
      const uint64_t lo = span.offset, hi = span.offset + span.bytes;
      for (int ri = static_cast<int>(r.first); ri <= static_cast<int>(r.last) && ri < kRegionCount; ++ri)
        for (TensorId id : by_region[static_cast<size_t>(ri)]) {
          const auto at = static_cast<uint64_t>(p->tensor(id).offset);
          if (at >= lo && at < hi) to.push_back(id);
        }
    }
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
    to.erase(std::remove(to.begin(), to.end(), kNoTensor), to.end());
  };
  add(a.reads, n.in, n.rin);
  add(a.writes, n.out, n.rout);
  return a;
}

bool contains(const std::vector<TensorId>& sorted, TensorId id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

}  // namespace

std::string dot_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string atlas_dot(const CompiledModel& m) {
  const GraphAtlas& a = m.atlas;
  const AtlasStats st = a.stats();
  // Slots per capture, in variant-major order (the first one is the capture's representative).
  std::map<int32_t, std::vector<std::pair<int, int>>> by_capture;
  for (int v = 0; v < kVariantCount; ++v) {
    if (!a.present(static_cast<Variant>(v))) continue;
    for (int g = 0; g < kGraphIdCount; ++g) {
      const AtlasSlot& s = a.slot(static_cast<Variant>(v), static_cast<GraphId>(g));
      if (s.graph && s.captured_idx >= 0) by_capture[s.captured_idx].push_back({v, g});
    }
  }
  auto node = [](int v, int g) { return "s" + std::to_string(v) + "_" + std::to_string(g); };
  auto live = [&](int v, int g) {
    return a.present(static_cast<Variant>(v)) &&
           a.slot(static_cast<Variant>(v), static_cast<GraphId>(g)).graph &&
           a.slot(static_cast<Variant>(v), static_cast<GraphId>(g)).captured_idx >= 0;
  };
  // A pastel fill per shared capture (golden-ratio hues), so the slots of one capture share a colour.
  std::map<int32_t, std::string> fill;
  for (const auto& [idx, slots] : by_capture)
    if (slots.size() > 1) {
      const double hue = static_cast<double>(fill.size()) * 0.6180339887;
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.3f 0.300 1.000", hue - static_cast<double>(static_cast<int>(hue)));
      fill[idx] = buf;
    }

  std::string d = "digraph atlas {\n";
  d += "  graph [rankdir=TB, newrank=true, fontname=\"Helvetica\", labelloc=t, nodesep=0.25, ranksep=0.25, "
       "label=" +
       lines({"GraphAtlas: one column per present variant, one row per GraphId, a box per non-empty slot",
              std::to_string(st.slots) + " slots, " + std::to_string(st.unique) + " unique captures, " +
                  std::to_string(st.reused) +
                  " slots reuse one; arrows (and a shared colour) join the slots of one shared capture"}) +
       "];\n";
  d += "  node [shape=box, style=\"rounded\", fontname=\"Helvetica\", fontsize=9, width=2.0];\n";
  d += "  edge [color=\"#b45f06\", penwidth=1.6, arrowsize=0.6];\n";
  for (int v = 0; v < kVariantCount; ++v) {
    const auto var = static_cast<Variant>(v);
    if (!a.present(var)) continue;
    const bool train = is_train(var);
    d += "  subgraph cluster_v" + std::to_string(v) + " {\n";
    d += "    label=" +
         lines({variant_name(var), "batch " + std::to_string(m.batch_of[static_cast<size_t>(v)]) + ", " +
                                       std::to_string(m.sample_of[static_cast<size_t>(v)].w) + "x" +
                                       std::to_string(m.sample_of[static_cast<size_t>(v)].h) + ", " +
                                       (train ? "train" : "inference") + " graph"}) +
         ";\n";
    d += std::string("    style=\"rounded,filled\"; fillcolor=\"") + (train ? "#eef4fb" : "#f3eefb") +
         "\"; color=\"#8899aa\";\n";
    int prev = -1;
    for (int g = 0; g < kGraphIdCount; ++g) {
      if (!live(v, g)) continue;
      const auto gid = static_cast<GraphId>(g);
      const AtlasSlot& s = a.slot(var, gid);
      const auto& owners = by_capture[s.captured_idx];
      const bool first = owners.front() == std::make_pair(v, g);
      const std::string cap = (first ? "capture #" : "reuses capture #") + std::to_string(s.captured_idx);
      d += "    " + node(v, g) + " [label=" +
           lines({graph_id_name(gid), shape_label(s.shape) + ", " + stream_name(s.stream), cap}) +
           (owners.size() > 1 ? ", style=\"rounded,filled\", fillcolor=\"" + fill[s.captured_idx] + "\""
                              : "") +
           "];\n";
      if (prev >= 0) d += "    " + node(v, prev) + " -> " + node(v, g) + " [style=invis];\n";  // keeps rows
      prev = g;
    }
    d += "  }\n";
  }
  for (int g = 0; g < kGraphIdCount; ++g) {  // one row per GraphId
    std::string row;
    for (int v = 0; v < kVariantCount; ++v)
      if (live(v, g)) row += " " + node(v, g) + ";";
    if (!row.empty()) d += "  { rank=same;" + row + " }\n";
  }
  // Shared captures: a chain through their slots, in variant order.
  for (const auto& [idx, slots] : by_capture) {
    if (slots.size() < 2) continue;
    d += "  // capture " + std::to_string(idx) + " shared by:";
    for (const auto& [v, g] : slots)
      d += std::string(" ") + variant_name(static_cast<Variant>(v)) + "/" +
           graph_id_name(static_cast<GraphId>(g));
    d += "\n";
    for (size_t k = 1; k < slots.size(); ++k)
      d += "  " + node(slots[k - 1].first, slots[k - 1].second) + " -> " +
           node(slots[k].first, slots[k].second) + ";\n";
  }
  d += "}\n";
  return d;
}

std::string graph_dot(const CompiledModel& m, bool training) {
  const ComputationGraph* graph = training ? m.train.get() : m.inference.get();
  const char* name = training ? "train" : "inference";
  const MemoryPlan* p = names_plan(m);
  std::vector<std::vector<TensorId>> by_region;
  if (p) {
    by_region.resize(kRegionCount);
    for (const DTensor& t : p->tensors()) by_region[static_cast<size_t>(t.region)].push_back(t.id);
  }
  struct Ref {
    GraphId gid;
    size_t index;
    const GraphNode* node;
    Access access;
  };
  std::vector<Ref> order;  // step order: GraphIds in enum order, nodes in order
  int clusters = 0;
  if (graph)
    for (int g = 0; g < kGraphIdCount; ++g) {
      const auto gid = static_cast<GraphId>(g);
      const auto& nodes = graph->nodes(gid);
      clusters += nodes.empty() ? 0 : 1;
      for (size_t i = 0; i < nodes.size(); ++i)
        order.push_back({gid, i, &nodes[i], access_of(nodes[i], by_region, p)});
    }
  auto id_of = [](const Ref& r) {
    return "n" + std::to_string(static_cast<int>(r.gid)) + "_" + std::to_string(r.index);
  };
  // Edges: for each read, the latest earlier writer on the reader's path; a reader outside the A/B pairs
  // takes the latest writer of each alternative.
  std::map<std::pair<size_t, size_t>, std::vector<TensorId>> edges;
  for (size_t j = 0; j < order.size(); ++j) {
    const char alt_r = alternative(order[j].gid);
    for (TensorId t : order[j].access.reads) {
      std::set<char> covered;
      for (size_t i = j; i-- > 0;) {
        if (!contains(order[i].access.writes, t)) continue;
        const char alt_w = alternative(order[i].gid);
        if (alt_r && alt_w && alt_r != alt_w) continue;  // the other buffer's pass never feeds this one
        edges[{i, j}].push_back(t);
        if (alt_w == 0 || alt_w == alt_r) break;
        covered.insert(alt_w);
        if (covered.size() == 2) break;
      }
    }
  }

  std::string d = std::string("digraph ") + name + " {\n";
  d += "  graph [rankdir=TB, compound=true, fontname=\"Helvetica\", labelloc=t, label=" +
       lines({std::string(name) + " graph: " + std::to_string(order.size()) + " nodes in " +
                  std::to_string(clusters) + " GraphIds, " + std::to_string(edges.size()) + " edges",
              "edge: a later node reads a tensor this node writes (tensor ids; range operands count too)"}) +
       "];\n";
  d += "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
  d += "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\", fontcolor=\"#444444\"];\n";
  d +=
      "  subgraph cluster_legend {\n    label=\"legend\"; style=\"dashed\"; color=\"#aaaaaa\"; fontsize=9;\n";
  d += "    legend_compute [label=\"compute op\\nlayer\", style=\"filled\", fillcolor=\"#fff2cc\"];\n";
  d += "    legend_range [label=\"range op\\nlabel\", style=\"rounded,filled\", fillcolor=\"#dbe9f6\"];\n";
  d += "    legend_side [label=\"side-stream node\", style=\"filled,dashed\", fillcolor=\"#fff2cc\", "
       "color=\"#c0392b\", penwidth=2];\n";
  d += "  }\n";
  if (graph)
    for (int g = 0; g < kGraphIdCount; ++g) {
      const auto gid = static_cast<GraphId>(g);
      const auto& nodes = graph->nodes(gid);
      if (nodes.empty()) continue;
      d += "  subgraph cluster_g" + std::to_string(g) + " {\n";
      d += "    label=" +
           lines({graph_id_name(gid), std::string("stream ") + stream_name(default_stream(gid)) + ", " +
                                          std::to_string(nodes.size()) +
                                          (nodes.size() == 1 ? " node" : " nodes") +
                                          (shape_invariant(gid) ? ", shape-invariant" : "")}) +
           ";\n    style=\"rounded\"; color=\"#8899aa\"; fontsize=11;\n";
      for (const Ref& r : order) {
        if (r.gid != gid) continue;
        const GraphNode& n = *r.node;
        const bool range = n.kind == NodeKind::RANGE;
        std::string tip;
        auto list = [&](const char* what, const std::vector<TensorId>& ids,
                        const std::vector<RangeRef>& refs) {
          if (ids.empty() && refs.empty()) return;
          tip += std::string(tip.empty() ? "" : "\n") + what + ":";
          for (TensorId id : ids) tip += " " + tensor_label(p, id) + ";";
          for (const RangeRef& rr : refs) tip += " [" + range_label(p, rr) + "];";
        };
        list("in", n.in, n.rin);
        list("out", n.out, n.rout);
        if (!n.params.empty()) tip += "\nparams: " + std::to_string(n.params.size()) + " bytes";
        std::string label = n.op + "\n" + n.label;
        if (n.side_stream) label += "\n[side stream]";
        std::string style = range ? "rounded,filled" : "filled";
        if (n.side_stream) style += ",dashed";
        d += "    " + id_of(r) + " [label=" + quoted(label) + ", tooltip=" + quoted(tip) + ", style=\"" +
             style + "\", fillcolor=\"" + (range ? "#dbe9f6" : "#fff2cc") + "\"" +
             (n.side_stream ? ", color=\"#c0392b\", penwidth=2" : "") + "];\n";
      }
      d += "  }\n";
    }
  for (const auto& [ij, tensors] : edges) {
    std::string label;
    for (size_t k = 0; k < tensors.size() && k < 3; ++k)
      label += (k ? "\n" : "") + tensor_label(p, tensors[k]);
    if (tensors.size() > 3) label += "\n+" + std::to_string(tensors.size() - 3) + " more";
    d += "  " + id_of(order[ij.first]) + " -> " + id_of(order[ij.second]) + " [label=" + quoted(label) +
         "];\n";
  }
  d += "}\n";
  return d;
}

}  // namespace fresco
