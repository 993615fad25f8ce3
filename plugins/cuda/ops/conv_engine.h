// cuDNN's backend (graph) API for one convolution direction on fp16 / bf16 NHWC maps: the operation graph,
// the engine configurations cuDNN's heuristics rank first (mode A), each finalized and timed on scratch
// buffers of non-zero values at prepare time; the fastest deterministic one is kept, and recorded in the
// tuning cache (tuning/tuning_cache.h) so later runs on the machine take the same one without timing. Any
// failure while searching falls back to the legacy API. On the H200 these engines run ResNet's 3x3
// convolutions 2-5x faster than the best algorithm of the legacy API (docs/performance.md). Engines whose
// numerical notes say non-deterministic or reduced-precision reduction are never used; fp32 stays on the
// legacy API (conv_plan.cpp), where FMA math keeps it strict.
#pragma once

#include <cudnn.h>

#include <memory>
#include <vector>

#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"
#include "ops/cudnn_backend.h"

namespace fresco::cuda {

// A finalized execution plan and the descriptors it was built from.
struct EnginePlan {
  std::vector<cudnnBackendDescriptor_t> keep;  // tensors, convolution, operation, graph
  cudnnBackendDescriptor_t plan = nullptr;
  uint64_t workspace = 0;
  float ms = 0.0f;            // measured time of one run at prepare
  bool stats = false;         // a forward that also writes the per-channel sums of y (genstats)
  float sums_pass_ms = 0.0f;  // with stats: the measured time of the separate sums pass it replaces
  EnginePlan() = default;
  EnginePlan(const EnginePlan&) = delete;
  EnginePlan& operator=(const EnginePlan&) = delete;
  ~EnginePlan();
};

// The fastest qualifying engine for direction d of geometry g in dtype (FR_F16 / FR_BF16); null when none
// qualifies within max_workspace (the caller then uses the legacy API). With `stats` (forward only) the graph
// also computes the per-channel sum and sum of squares of y (cuDNN genstats, f32), and the plan records the
// time of the separate sums pass (launch_conv_sums) it would replace. `what` names the convolution in logs.
std::shared_ptr<EnginePlan> plan_conv_engine(Context* ctx, const sdk::ConvShape& g, FrDType dtype, ConvDir d,
                                             bool stats, uint64_t max_workspace, const std::string& what);

// Runs the plan: a = x (forward, backward-filter) or dx (backward-data), b = w or dw, c = y or dy, in the
// roles of the direction; `ws` holds at least plan.workspace bytes. `sums` (2k floats: the sums, then the
// sums of squares) is given exactly when the plan has statistics.
void run_conv_engine(Context* ctx, const EnginePlan& p, void* a, void* b, void* c, void* ws, cudaStream_t s,
                     float* sums = nullptr, int64_t k = 0);

}  // namespace fresco::cuda
