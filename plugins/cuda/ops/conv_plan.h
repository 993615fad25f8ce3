// A cuDNN convolution planned once, before capture: NHWC activations, KRSC weights ([K, R, S, C/g]), any
// stride, padding, dilation and groups. fp32 runs with CUDNN_FMA_MATH (strict fp32, no TF32, like the fc
// GEMMs); fp16 and bf16 run on tensor cores with fp32 accumulation. Algorithms come from cuDNN's heuristics
// (the first DETERMINISTIC candidate whose workspace fits), so the choice is the same on every run of one
// machine and the results are bit-reproducible. Uses cuDNN's legacy convolution API, which cuDNN 9 still
// ships (docs/decisions.md); this file and conv_plan.cpp are the only users of it. fp16 / bf16 convolutions
// large enough to matter run on cuDNN backend engines instead (ops/conv_engine.h), timed at prepare.
#pragma once

#include <cudnn.h>

#include "cuda_common.h"
#include "fresco/conv_geometry.hpp"
#include "fresco/conv_prologue.hpp"
#include "ops/conv_engine.h"

namespace fresco::cuda {

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnMathType_t fwd_math{}, data_math{}, filter_math{};
  // fp16 / bf16: backend engines (ops/conv_engine.h) where one qualified; they replace the legacy algorithm.
  std::shared_ptr<EnginePlan> engine_fwd, engine_data, engine_filter;
  // A forward with the sums output (ops.h): the engine that also computes them (genstats) when it measured
  // faster than the forward plus a separate sums pass (channel_moments.h), which runs otherwise.
  std::shared_ptr<EnginePlan> engine_fwd_stats;
  bool sums = false;
  // Few input channels (ops/narrow_conv.h): the forward (with its sums) and / or the weight gradient on
  // fresco's own kernels; `shape` is their geometry.
  bool narrow_fwd = false, narrow_wgrad = false;
  // 3x3, 64 -> 64 channels, 32 wide on Hopper (ops/conv3x3_wgmma.h): the forward (with its sums), the input
  // gradient and / or the weight gradient on fresco's own kernels.
  bool wgmma_fwd = false, wgmma_data = false, wgmma_filter = false;
  sdk::ConvShape shape{};
  FrDType dtype = FR_F32;
  int64_t rows = 0, k = 0;  // of y as [rows, K]
  uint64_t workspace = 0;   // bytes: the largest of the planned directions (and of the sums pass)
};

// kConvForwardSums: the forward also writes the per-channel sums of y (conv2d's sums output).
enum ConvDirections : unsigned {
  kConvForward = 1,
  kConvBackwardData = 2,
  kConvBackwardFilter = 4,
  kConvForwardSums = 8
};

// Builds descriptors for geometry g in `dtype` (FR_F32, FR_F16, FR_BF16) and picks an algorithm for every
// direction in `dirs`. Throws KernelError (FR_ERR_UNSUPPORTED) when cuDNN offers no deterministic algorithm
// within max_workspace bytes.
void plan_conv(Context* ctx, ConvPlan& p, const sdk::ConvShape& g, FrDType dtype, unsigned dirs,
               uint64_t max_workspace);
// `sums` (2K floats) exactly when the plan was made with kConvForwardSums. With `bn` (a batchnorm prologue,
// ops.h) x is the batchnorm's input and its applied map is written to `applied` (x's size), which the
// convolution reads: fused into the Hopper kernels, else a pass of its own (ops/conv_prologue.h); with
// `residual` too (the join prologue, ops.h), the join's other branch added before the relu.
void run_conv_forward(Context* ctx, const ConvPlan& p, const void* x, const void* w, void* y, void* ws,
                      uint64_t ws_bytes, cudaStream_t s, float* sums = nullptr,
                      const sdk::BnPrologue* bn = nullptr, void* applied = nullptr,
                      const void* residual = nullptr);
void run_conv_backward_data(Context* ctx, const ConvPlan& p, const void* dy, const void* w, void* dx,
                            void* ws, uint64_t ws_bytes, cudaStream_t s);
void run_conv_backward_filter(Context* ctx, const ConvPlan& p, const void* dy, const void* x, void* dw,
                              void* ws, uint64_t ws_bytes, cudaStream_t s);
void destroy_conv(ConvPlan& p) noexcept;

// Plans for kernels: prepare() keeps a ConvPlan as the node's state.
FrError* conv_prepare_state(void* ctx, const FrCall* call, const char* op, const FrConvParams& params,
                            const FrTensor& x, const FrTensor& w, const FrTensor& y, unsigned dirs,
                            void** state, uint64_t* workspace_bytes) noexcept;
void conv_destroy_state(void* state) noexcept;

}  // namespace fresco::cuda
