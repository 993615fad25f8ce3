// Inspection of a compiled job (`fresco plan`, `fresco graph`): the memory map of the base MemoryPlan as a
// self-contained SVG and as a text summary, and the GraphAtlas and the train/inference graphs as Graphviz
// DOT. Invariants: pure functions of a CompiledModel (no device, no files); every DTensor of the base plan
// appears in the SVG exactly once, with the plan's offset; every name is escaped for XML or DOT. Tested by
// tests/core/test_inspect.cpp.
#pragma once

#include <string>
#include <string_view>

#include "fresco/core/compiler.h"

namespace fresco {

// The base plan (train_base) as a picture: regions in address order as bands to scale (tiny pieces at a
// minimum height, stated in the legend), one box per DTensor with a <title> tooltip and data-tensor-id /
// data-offset attributes, F-region tensors that share bytes side by side in lanes, totals per family and per
// present variant in tables at the bottom.
std::string memory_map_svg(const CompiledModel& m);
// One line per non-empty region (name, offset, bytes, tensors), totals per family, arena bytes, and per
// present variant its batch and the bytes its shapes use against the slot bytes.
std::string memory_map_text(const CompiledModel& m);

// The GraphAtlas: one column (cluster) per present variant, one row per GraphId, a node per non-empty slot
// naming its capture; the slots that share one capture (same captured_idx) share a colour and are chained by
// edges in variant order.
std::string atlas_dot(const CompiledModel& m);
// The train (training = true) or inference graph: one cluster per non-empty GraphId in step order, a node per
// GraphNode, and an edge from each node to the later nodes that read a tensor it writes.
std::string graph_dot(const CompiledModel& m, bool training);

// Escaping, shared with the tests: text and attribute values for XML; the inside of a DOT "..." string.
std::string xml_escape(std::string_view s);
std::string dot_escape(std::string_view s);

}  // namespace fresco
