// The compiler's internals shared by its translation units: core/src/compiler.cpp (the stages' driver, the
// graph assembly), compiler/arch_plan.cpp (stage 0: layers, fusions and the options that pick them),
// compiler/memory_planning.cpp (the memory plan and the feature lifetimes), compiler/emit_layers.cpp (each
// layer's forward / backward / loss nodes) and compiler/emit_update.cpp (the casts, the optimizer and the
// early update). Not installed.
#pragma once

#include <string>
#include <vector>

#include "fresco/core/compiler.h"
#include "layers/layer_rule.h"

namespace fresco::compile_detail {

// arch_plan.cpp
// The index of the first layer with parameters (-1: none).
int first_param_index(const ArchPlan& a);
// Multiply-adds of fc layer l's forward (and of each of its gradients) at the training batch.
int64_t fc_macs(const CompileOptions& o, const LayerDescriptor& l);
// The relu fused into the residual join it follows (a view of the join's output).
bool fused_join_relu(const ArchPlan& a, const LayerDescriptor& l);
// A batchnorm_add join's other branch: the input that is not its batchnorm (LayerDescriptor::join_bn).
inline int32_t join_other_input(const LayerDescriptor& join) {
  return join.join_bn == join.input ? join.input2 : join.input;
}

// emit_layers.cpp
GraphNode range_node(const char* op, std::vector<RangeRef> rin, std::vector<RangeRef> rout,
                     const std::string& label);
// The host-to-device copy of input buffer ab ('A' / 'B') into its I regions.
void emit_transfer(ComputationGraph& g, char ab);
// Normalise input buffer ab and copy its labels.
void emit_input(layers::EmitContext& cx, const CompiledModel& m, char ab);
// Forward of layer i in training (CompileOptions::fork_shortcuts may move a branch to its fork).
void emit_forward(layers::EmitContext& cx, const CompiledModel& m, int i);
// Backward of layer i, writing dx as its input gradient.
void emit_backward(layers::EmitContext& cx, const CompiledModel& m, int i, TensorId dx);
void emit_loss(layers::EmitContext& cx, const CompiledModel& m, bool training);
// Inference forward of layer l; `value` maps layers to the tensor that holds their output in inference.
void emit_inference_forward(layers::EmitContext& cx, const CompiledModel& m, const LayerDescriptor& l,
                            std::vector<TensorId>& value);
// The map layer i reads (its first input).
TensorId layer_input(const CompiledModel& m, int i);
// The map layer i reads in training: its input, or the subsampled map its join writes beside it
// (CompileOptions::subsampled_shortcuts).
TensorId training_input(const CompiledModel& m, int i);
GraphNode add_node(TensorId a, TensorId b, TensorId y, const std::string& label, bool relu = false);

// emit_update.cpp
// The step's tail after the backward: the gradient casts (fp16: and unscale), the optimizer's updates, the
// loss scale and step_done, and the early update's parts in DEEP_FWD_BWD; sets m.schedule and
// m.weight_cast_in_step.
void emit_update(ComputationGraph& g, CompiledModel& m);
// Whether CompileOptions::speculative_update can run: fp16 with an early update's conditions.
bool speculative_update_possible(const CompiledModel& m);
// The f32 ranges the speculative early updates write (arena offset and bytes, the part's first layer or -1
// for the update at the end of DEEP_FWD_BWD), in emit order; needs m.speculative and m's base plan.
std::vector<CompiledModel::SpeculativeBackup> speculative_ranges(const CompiledModel& m);

}  // namespace fresco::compile_detail
