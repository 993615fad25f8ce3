// Graph nodes built by hand for SimpleTask tests: a compute node over tensor ids and a range node over
// ranges (the CUDA tests through plugins/cuda/gpu_fixture.h, e2e/speculative_restore_case.h).
#pragma once

#include <utility>
#include <vector>

#include "fresco/core/graph.h"

namespace fresco::test {

inline GraphNode node(const char* op, std::vector<TensorId> in, std::vector<TensorId> out) {
  GraphNode n;
  n.op = op;
  n.in = std::move(in);
  n.out = std::move(out);
  return n;
}
inline GraphNode range_node(const char* op, std::vector<RangeRef> rin, std::vector<RangeRef> rout) {
  GraphNode n;
  n.kind = NodeKind::RANGE;
  n.op = op;
  n.rin = std::move(rin);
  n.rout = std::move(rout);
  return n;
}

}  // namespace fresco::test
