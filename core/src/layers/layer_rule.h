// LayerRule: the per-kind forward and backward rules the Compiler uses to emit graph nodes (internal to
// core). Invariant: rules only emit nodes over tensor ids; shapes were fixed by derive_arch_plan and memory
// by the plan. One file per layer kind in this folder; the table in rules.cpp is explicit (no static
// registration).
#pragma once

#include "fresco/core/compiler.h"

namespace fresco::layers {

// A compute node of `op` over tensor ids (params, side stream and the like are set on the result).
inline GraphNode compute_node(std::string op, std::string label, std::vector<TensorId> in,
                              std::vector<TensorId> out) {
  GraphNode n;
  n.op = std::move(op);
  n.label = std::move(label);
  n.in = std::move(in);
  n.out = std::move(out);
  return n;
}

// The training forward of batchnorm `bn` computed by the residual join that reads it: y = bn(x) + residual,
// then the join's relu when `relu` (layers/batchnorm.cpp).
GraphNode batchnorm_add_node(const LayerDescriptor& bn, TensorId x, TensorId residual, TensorId y, bool relu);
// The statistics-only training batchnorm of bn over x (ops.h; a join whose map a conv writes:
// CompileOptions::join_prologue).
GraphNode batchnorm_statistics_node(const LayerDescriptor& bn, TensorId x);

// The weight gradient of fc `l` as a node of its own (fc_backward part 2: dw, db from dy and x), on the side
// stream when `side` (layers/fc.cpp).
GraphNode fc_weight_gradient_node(const LayerDescriptor& l, TensorId x, TensorId dy, bool side);

struct EmitContext {
  ComputationGraph* graph;
  GraphId gid;
  const JobTensors* job;
  const CompileOptions* options;
  GraphNode& add(GraphNode n) { return graph->add(gid, std::move(n)); }
};

// Whether a layer's backward is split (CompileOptions::overlap_weight_gradients): the input gradient as one
// node on the main stream, the weight gradient as another on the side stream. Only when dx is needed.
inline bool splits_weight_gradient(const EmitContext& cx, TensorId dx) {
  return dx != kNoTensor && cx.options && cx.options->overlap_weight_gradients;
}
// Adds a split backward: `input` on the main stream (first joining the side stream when `join`), `weight` on
// the side stream.
inline void add_split_backward(EmitContext& cx, GraphNode input, GraphNode weight, bool join) {
  input.join_side = join;
  weight.side_stream = true;
  cx.add(std::move(input));
  cx.add(std::move(weight));
}

class LayerRule {
 public:
  virtual ~LayerRule() = default;
  // Output shape per sample; throws fresco::Error naming the layer on invalid input.
  virtual Shape out_shape(const LayerDescriptor& l, const Shape& in) const = 0;
  virtual bool has_params() const { return false; }
  // True when the output is the input itself (no node, no tensor) in this mode, or when the layer was fused
  // into the previous one (its work is done there).
  bool is_view(const LayerDescriptor& l, bool training) const {
    return l.fused_into_prev || view(l, training);
  }
  virtual bool view(const LayerDescriptor& l, bool training) const {
    (void)l;
    (void)training;
    return false;
  }
  virtual void alloc_params(LayerDescriptor& l, MemoryPlan& plan) const {
    (void)l;
    (void)plan;
  }
  virtual void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y,
                       bool training) const = 0;
  // dx is kNoTensor when the gradient w.r.t. the input is not needed.
  virtual void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                        TensorId dx) const = 0;
  // Nodes of UPDATE_BN_INF_PARAMS: what the inference forward needs computed from the trained state, once
  // before an evaluation pass (batchnorm's folded scale and shift). Nothing by default.
  virtual void inference_prepare(EmitContext& cx, const LayerDescriptor& l) const {
    (void)cx;
    (void)l;
  }
};

const LayerRule& rule_for(LayerKind kind);
LayerKind layer_kind_of(const std::string& kind, const std::string& where);

}  // namespace fresco::layers
