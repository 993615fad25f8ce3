// Shared helpers of the CUDA backend: the per-device context, check macros that turn CUDA/cuBLAS failures
// into plugin errors carrying file:line (never exit), launch-size helpers. Included by .cu and .cpp files
// alike.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

#include "fresco/plugin.hpp"
#include "ops/sgemm.h"
#include "tuning/tuning_cache.h"

struct cudnnContext;  // cudnnHandle_t, without pulling cudnn.h into every file

#include <memory>

namespace fresco::cuda {

struct EnginePlan;  // a cuDNN backend execution plan (ops/conv_engine.h)

// A cuDNN convolution algorithm chosen for one shape and direction (ops/conv_plan.cpp).
struct ConvChoice {
  int algo, math;
  uint64_t workspace;
};

// A matmul configuration chosen for one problem (ops/matmul_search.cu): a cuBLASLt algorithm, or fresco's own
// kernel (ops/sgemm.h) when own.tile >= 0.
struct MatmulChoice {
  cublasLtMatmulAlgo_t algo{};
  uint64_t workspace = 0;
  SgemmConfig own{};
};

struct Context {
  int device = 0;
  cublasLtHandle_t lt = nullptr;
  cudnnContext* dnn = nullptr;  // created by the first convolution plan (ops/conv_plan.cpp)
  uint64_t allocated = 0;       // bytes from arena_alloc (for memory_in_use)
  int sm_count = 0;
  // cuBLASLt algorithm search at prepare (FRESCO_CUBLAS_AUTOTUNE): 0 = the heuristic's first choice, 1 = the
  // fastest of the heuristic's candidates, 2 (default) = also every configuration cuBLASLt accepts.
  int autotune = 2;
  // FRESCO_CUBLAS_LOG=1: print each matmul choice to stderr; 2: also every timed candidate (index,
  // description as the tuning cache records it, time).
  int log_choices = 0;
  // fresco's own fp32 GEMM (ops/sgemm.h) in that search (FRESCO_CUDA_SGEMM): 0 (default) = never, 1 = as
  // further candidates, timed with cuBLASLt's, 2 = only its configurations wherever it fits. Off by default:
  // it took 0.93-1.13x cuBLASLt's time on the MLP's problems (H200), and its sliced-k summation order makes
  // CUDA training drift from the CPU's where cuBLASLt's matches it (docs/decisions.md).
  int own_sgemm = 0;
  // Choices timed at prepare, kept across runs (tuning/tuning_cache.h; FRESCO_CUDA_TUNING_CACHE). `machine`
  // (device, SM count, CUDA, cuBLASLt and cuDNN versions) begins every key.
  std::unique_ptr<TuningCache> tuning;
  std::string machine;
  // Algorithms chosen at prepare, by problem key, so every node of one shape uses the same algorithm.
  std::map<std::string, MatmulChoice> algo_cache;
  // fc layers with at most 32 outputs run on ops/small_fc.cu's kernels instead of cuBLASLt
  // (FRESCO_CUDA_SMALL_FC=0 turns it off).
  bool small_fc = true;
  // An fc weight gradient's GEMM also writes the bias gradient (cuBLASLt's BGRADB epilogue) where cuBLASLt
  // offers it, instead of a separate column-sum pass (FRESCO_CUBLAS_BGRAD=0 keeps the pass).
  bool fused_bias_grad = true;
  // batchnorm_backward given beta recomputes its fused relu's mask from x instead of reading y
  // (FRESCO_CUDA_BN_RECOMPUTE_MASK=0 reads y).
  bool bn_recompute_mask = true;
  // Small memset nodes of captured graphs become kernel nodes (graph/memset_nodes.h;
  // FRESCO_CUDA_GRAPH_MEMSETS=0 keeps them as memset nodes).
  bool replace_memsets = true;
  // With dependent_launch and replace_memsets, FRESCO_CUDA_GRAPH_MEMSET_DEPENDENT=1: a replacing kernel whose
  // only dependency is a kernel node follows it by a programmatic edge (graph/memset_nodes.h); batchnorm's
  // element-wise passes (after which cuDNN's memsets come) allow it once their loop is done. Off until timed.
  bool memset_dependent_launch = false;
  // FRESCO_CUDA_GRAPH_DOT=PREFIX: each captured graph is also written as PREFIX<n>.dot
  // (cudaGraphDebugDotPrint, n counting from 0 per context), for looking at its branches.
  std::string graph_dot;
  int graphs_captured = 0;
  bool conv_autotune = true;  // time cuDNN's algorithms at prepare (FRESCO_CUDNN_AUTOTUNE=0 turns it off)
  // FRESCO_CUDNN_DETERMINISTIC=0 also admits cuDNN's non-deterministic algorithms (results then vary from
  // run to run); FRESCO_CUDNN_LOG=1 prints each convolution choice with Find's times, 2 also every timed
  // engine candidate (what scripts/tune_step.py --convs reads).
  bool conv_deterministic = true;
  int conv_log = 0;
  // cuDNN backend engines for fp16 / bf16 convolutions (FRESCO_CUDNN_ENGINES): 0 = legacy API only,
  // 1 (default) = for convolutions of at least 2^28 FLOPs, 2 = for every convolution. One plan per shape and
  // direction, shared by the nodes (null: no engine qualified, the legacy API runs it).
  int conv_engines = 1;
  // Engine configurations timed per convolution, best first by heuristics mode A
  // (FRESCO_CUDNN_ENGINE_CANDIDATES, 1..1000; mode A lists about 30 for ResNet's convolutions, so the default
  // times them all: ResNet-18 0.7% faster than with the first 10, compile 2.1 s instead of 1.1 s).
  int conv_engine_candidates = 64;
  // A conv2d with the sums output (ops.h) on an engine (FRESCO_CUDNN_GENSTATS): 0 (default while
  // conv_deterministic) = always the convolution, then a separate sums pass; 1 (default otherwise) = cuDNN's
  // fused statistics (genstats) when they measured faster than that pair at prepare; 2 = genstats whenever an
  // engine offers them. Only for a convolution whose forward runs on an engine (conv_engines). genstats add
  // in an order that changes from run to run (fp16 training then differs from compile to compile).
  int conv_genstats = 0;
  // fp16 / bf16 convolutions with few input channels (a stem) on fresco's own kernels (ops/narrow_conv.h)
  // instead of cuDNN (FRESCO_CUDA_NARROW_CONV=0 keeps cuDNN).
  bool narrow_conv = true;
  // 3x3 convolutions of 64 -> 64 channels on 32-wide fp16 / bf16 maps on fresco's own warpgroup-MMA kernels
  // (ops/conv3x3_wgmma.h; compute capability 9.0 only; FRESCO_CUDA_WGMMA_CONV): 0 = cuDNN, 1 = the forward
  // and the input gradient, 2 (default) = also the weight gradient.
  int conv3x3_wgmma = 0;
  // Blocks of that weight gradient (FRESCO_CUDA_WGMMA_WGRAD_SMS; default 0 = seven twelfths of the SMs,
  // ops/side_stream_sms.h): fewer leave SMs to the main stream it runs beside.
  int conv3x3_wgrad_sms = 0;
  // The device's peak memory bandwidth in GB/s (memory clock x bus width x 2), 0 when the driver does not
  // say: how many SMs cuDNN's weight gradients leave to the memory-bound passes beside them depends on it
  // (ops/side_stream_sms.h).
  double memory_gbs = 0;
  // SMs asked of cuDNN's weight-gradient engines (CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET;
  // FRESCO_CUDNN_WGRAD_SMS, 0 = every SM): -1 (unset) chooses by the memory bandwidth an SM has
  // (ops/side_stream_sms.h).
  int cudnn_wgrad_sms = -1;
  std::map<std::string, std::shared_ptr<EnginePlan>> engine_plans;
  // Programmatic dependent launch (ops/dependent_launch.cuh): on devices of compute capability >= 9.0 whose
  // kernels were built for 9.0 or newer (device_code_has_dependent_launch), unless
  // FRESCO_CUDA_DEPENDENT_LAUNCH=0.
  bool dependent_launch = false;
  // With dependent_launch: the training batchnorm forward's finalize and apply pass launch as programmatic
  // dependents of the kernel before each (FRESCO_CUDA_BN_DEPENDENT_LAUNCH=0 launches them plainly;
  // ResNet-18 bf16 on the H200 about 15 us a step faster, fp16 the same: docs/performance.md).
  bool bn_dependent_launch = false;
  // Channels per block of the training batchnorm forward's finalize from its own moments pass
  // (channel_totals): 4 (four times the blocks of 16, each warp's loads a quarter as deep; ResNet-18 bf16
  // about 15 us a step faster), or 16 with FRESCO_CUDA_BN_FINALIZE_CHANNELS=16.
  int bn_finalize_channels = 4;
  // The training batchnorm forward without given sums as one cooperative kernel (ops/bn_resident.h: the
  // statistics, a grid barrier, the finalize, another, the apply pass from the rows kept in shared memory)
  // instead of three kernels, with the same bits (FRESCO_CUDA_BN_RESIDENT): 0 (default) = never, 1 = where
  // the whole map fits in the resident blocks' shared memory, 2 = also where only part of it does (the rest
  // read again). Not yet timed on a GPU, hence off.
  int bn_resident = 0;
  // The same for the training batchnorm backward with its own gradient sums
  // (FRESCO_CUDA_BN_RESIDENT_BACKWARD, 0 / 1 / 2 as above; dy and x are kept).
  int bn_resident_backward = 0;
  // Channels per block of the finalizes from chunk partials outside the batchnorm forward's (sums_finalize:
  // conv sums and the masking passes' gradient sums; batchnorm backward's own): 16, or 4 with
  // FRESCO_CUDA_GRAD_FINALIZE_CHANNELS=4 (channel_totals).
  int grad_finalize_channels = 16;
  // With dependent_launch, FRESCO_CUDA_BN_GRAD_DEPENDENT_LAUNCH: 1 (default) = the finalizes from chunk
  // partials (sums_finalize, batchnorm backward's) and the backward's coefficient kernels launch as
  // programmatic dependents of the kernel before each; the partials passes before them allow it once their
  // rows are read, so the finalize's few blocks become resident only for the pass's tail (ResNet-18 at batch
  // 512 on an H100: bf16 about 18 us a step faster, fp16 36); 2 = also batchnorm backward's dx pass after its
  // coefficients (slower than 1); 0 = plain launches.
  int bn_grad_dependent_launch = 1;
  std::map<std::string, ConvChoice> conv_choice;
};

// Whether the plugin's kernels that run on the current device were compiled for compute capability 9.0 or
// newer, i.e. hold the griddepcontrol instructions (a build for 8.0 JIT-compiled on a newer GPU does not).
bool device_code_has_dependent_launch();

inline Context* ctx_of(void* p) {
  return static_cast<Context*>(p);
}
inline cudaStream_t stream_of(const FrCall* c) {
  return static_cast<cudaStream_t>(c->stream);
}

// True when every pointer is 16-byte aligned (null pointers count as aligned): 16-byte vector loads qualify.
inline bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* q : ptrs)
    if ((reinterpret_cast<uintptr_t>(q) & 15u) != 0) return false;
  return true;
}

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than needed.
inline unsigned grid_for(int64_t n, int threads, int sm_count) {
  const int64_t need = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count > 0 ? sm_count : 132) * 8;
  return static_cast<unsigned>(need < 1 ? 1 : (need < cap ? need : cap));
}

}  // namespace fresco::cuda

#define FR_CUDA_CHECK(expr)                                                                                 \
  do {                                                                                                      \
    const cudaError_t fr_e_ = (expr);                                                                       \
    if (fr_e_ != cudaSuccess)                                                                               \
      throw ::fresco::sdk::KernelError(FR_ERR_DEVICE, std::string(__FILE__ ":" FR_SDK_STR(__LINE__) ": ") + \
                                                          #expr + ": " + cudaGetErrorString(fr_e_));        \
  } while (0)

#define FR_CUBLAS_CHECK(expr)                                                                               \
  do {                                                                                                      \
    const cublasStatus_t fr_s_ = (expr);                                                                    \
    if (fr_s_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw ::fresco::sdk::KernelError(FR_ERR_DEVICE, std::string(__FILE__ ":" FR_SDK_STR(__LINE__) ": ") + \
                                                          #expr + ": cuBLAS status " +                      \
                                                          std::to_string(fr_s_));                           \
  } while (0)

// After a kernel launch: catches bad launch configurations at once.
// Grid-stride loop over [0, n) with a 64-bit index: `FR_CUDA_GRID_LOOP(i, n) { ... }`.
#define FR_CUDA_GRID_LOOP(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

#define FR_CUDA_LAUNCH_CHECK() FR_CUDA_CHECK(cudaGetLastError())

#define FR_CUDA_KERNEL_RUN(name) FrError* name##_run(void* ctx, const FrCall* call) noexcept
#define FR_CUDA_KERNEL_PREPARE(name) \
  FrError* name##_prepare(void* ctx, const FrCall* call, void** state, uint64_t* workspace_bytes) noexcept
#define FR_CUDA_KERNEL_DESTROY(name) void name##_destroy(void* ctx, void* state) noexcept
