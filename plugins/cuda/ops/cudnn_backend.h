// The descriptor plumbing of cuDNN's backend (graph) API shared by the convolution engines
// (ops/conv_engine.cpp) and bench/cudnn_fusion_probe.cpp: descriptors owned by a list and destroyed together,
// attribute setters, NHWC tensors, the convolution operation of each direction, heuristics' engine
// configurations and their notes. Failures throw sdk::KernelError (FR_CUDNN_CHECK).
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "ops/cudnn_common.h"

// The backend's handle attributes of operation graphs and execution plans are marked deprecated in cuDNN
// 9.14's headers in favour of a device-properties descriptor; they remain the portable way across cuDNN 9.x.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace fresco::cuda {

enum class ConvDir { FORWARD, BACKWARD_DATA, BACKWARD_FILTER };  // indexes conv_operation's table

namespace backend {
using Desc = cudnnBackendDescriptor_t;

// A descriptor owned by `keep` (destroy_all).
inline Desc make(std::vector<Desc>& keep, cudnnBackendDescriptorType_t t) {
  Desc d = nullptr;
  FR_CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d));
  keep.push_back(d);
  return d;
}

inline void destroy_all(std::vector<Desc>& keep) noexcept {
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  keep.clear();
}

template <class T>
void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const T* v) {
  FR_CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, n, v));
}
constexpr cudnnBackendAttributeType_t kDesc = CUDNN_TYPE_BACKEND_DESCRIPTOR;

// A 4-d tensor descriptor: logical dims [N, C, H, W] with the given strides; a virtual one is an
// intermediate of a fused graph, never in memory.
inline Desc tensor_desc(std::vector<Desc>& keep, int64_t uid, const int64_t (&dims)[4],
                        const int64_t (&strides)[4], cudnnDataType_t t, int64_t align,
                        bool is_virtual = false) {
  Desc d = make(keep, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (is_virtual) {
    const bool v = true;
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  }
  FR_CUDNN_CHECK(cudnnBackendFinalize(d));
  return d;
}

// An NHWC tensor (or KRSC filter) given as logical dims [N, C, H, W] with channels-last strides.
inline Desc nhwc_tensor(std::vector<Desc>& keep, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w,
                        cudnnDataType_t t, bool is_virtual = false) {
  return tensor_desc(keep, uid, {n, c, h, w}, {h * w * c, 1, w * c, c}, t, 16, is_virtual);
}

// A per-channel vector [1, K, 1, 1] (statistics, batchnorm coefficients).
inline Desc channel_vector(std::vector<Desc>& keep, int64_t uid, int64_t k,
                           cudnnDataType_t t = CUDNN_DATA_FLOAT) {
  const int64_t elem = t == CUDNN_DATA_FLOAT ? 4 : 2;
  return tensor_desc(keep, uid, {1, k, 1, 1}, {k, 1, k, k}, t, k * elem % 16 == 0 ? 16 : elem);
}

// The genstats operation: per-channel sum and sum of squares of y (f32 vectors sum, sqsum).
inline Desc genstats_operation(std::vector<Desc>& keep, Desc y, Desc sum, Desc sqsum) {
  Desc op = make(keep, CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, kDesc, 1, &y);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, kDesc, 1, &sum);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, kDesc, 1, &sqsum);
  FR_CUDNN_CHECK(cudnnBackendFinalize(op));
  return op;
}

// A 2-d cross-correlation with f32 accumulation: padding, stride and dilation as {h, w}.
inline Desc conv_descriptor(std::vector<Desc>& keep, const int64_t (&pad)[2], const int64_t (&stride)[2],
                            const int64_t (&dil)[2]) {
  Desc conv = make(keep, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t acc = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &acc);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  FR_CUDNN_CHECK(cudnnBackendFinalize(conv));
  return conv;
}

// The convolution operation of direction d (alpha 1, beta 0): a = x (forward, backward-filter) or dx
// (backward-data), b = w or dw, c = y or dy, in the roles of the direction.
inline Desc conv_operation(std::vector<Desc>& keep, ConvDir d, Desc a, Desc b, Desc c, Desc conv) {
  struct OpAttrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static constexpr OpAttrs kAttrs[3] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  const OpAttrs& at = kAttrs[static_cast<int>(d)];
  const float alpha = 1.0f, beta = 0.0f;
  Desc op = make(keep, at.type);
  set(op, at.x, kDesc, 1, &a);
  set(op, at.w, kDesc, 1, &b);
  set(op, at.y, kDesc, 1, &c);
  set(op, at.conv, kDesc, 1, &conv);
  set(op, at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  set(op, at.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  FR_CUDNN_CHECK(cudnnBackendFinalize(op));
  return op;
}

// The finalized operation graph of `ops` on handle h.
inline Desc operation_graph(std::vector<Desc>& keep, cudnnHandle_t h, const std::vector<Desc>& ops) {
  Desc graph = make(keep, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, kDesc, static_cast<int64_t>(ops.size()), ops.data());
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  FR_CUDNN_CHECK(cudnnBackendFinalize(graph));
  return graph;
}

// Up to max_count engine configurations from heuristics mode A (best first), else the fallback list; owned
// by `keep`. `sm_target` > 0 asks for configurations that use that many SMs (the plugin's weight gradients
// on some devices: ops/side_stream_sms.h, cudnn_wgrad_sm_target).
inline std::vector<Desc> engine_configs(std::vector<Desc>& keep, Desc graph, int64_t max_count,
                                        int32_t sm_target = 0) {
  std::vector<Desc> out;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur = make(keep, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, kDesc, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (sm_target > 0) set(heur, CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, CUDNN_TYPE_INT32, 1, &sm_target);
    if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, kDesc, 0, &count, nullptr) !=
        CUDNN_STATUS_SUCCESS)
      continue;
    count = std::min<int64_t>(count, max_count);
    std::vector<Desc> got;
    for (int64_t i = 0; i < count; ++i) got.push_back(make(keep, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t n = 0;
    if (count > 0 && cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, kDesc, count, &n,
                                              got.data()) == CUDNN_STATUS_SUCCESS)
      out.insert(out.end(), got.begin(), got.begin() + n);
    if (!out.empty()) break;  // the fallback list only when mode A offers nothing
  }
  return out;
}

// The engine of a configuration (owned by `keep`), or null.
inline Desc engine_of(std::vector<Desc>& keep, Desc cfg) {
  Desc engine = make(keep, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  return cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, kDesc, 1, &n, &engine) ==
                 CUDNN_STATUS_SUCCESS
             ? engine
             : nullptr;
}

// cuDNN's global index of the engine of cfg, or -1.
inline int64_t engine_index(std::vector<Desc>& keep, Desc cfg) {
  Desc engine = engine_of(keep, cfg);
  int64_t n = 0, global = -1;
  if (!engine || cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                          &global) != CUDNN_STATUS_SUCCESS)
    return -1;
  return global;
}

// cfg's knob choices as (cudnnBackendKnobType_t, value) pairs (2 TILE_SIZE, 14 STAGES, 24 KERNEL_CFG, 27 / 28
// TILE_CGA_M / _N, 40 TILE_M, 41 TILE_N, ...); empty when they cannot be read.
inline std::vector<std::pair<int, int64_t>> knob_choices(std::vector<Desc>& keep, Desc cfg) {
  std::vector<Desc> choices;
  for (int i = 0; i < CUDNN_KNOB_TYPE_COUNTS; ++i)
    choices.push_back(make(keep, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
  int64_t n = 0;
  std::vector<std::pair<int, int64_t>> out;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, kDesc, CUDNN_KNOB_TYPE_COUNTS, &n,
                               choices.data()) != CUDNN_STATUS_SUCCESS)
    return out;
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, m = 0;
    if (cudnnBackendGetAttribute(choices[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                 CUDNN_TYPE_KNOB_TYPE, 1, &m, &type) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(choices[static_cast<size_t>(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                 CUDNN_TYPE_INT64, 1, &m, &value) == CUDNN_STATUS_SUCCESS)
      out.emplace_back(static_cast<int>(type), value);
  }
  return out;
}

// Whether the engine of cfg carries any of `notes` (numerical notes); false when they cannot be read.
inline bool has_numerical_note(std::vector<Desc>& keep, Desc cfg,
                               std::initializer_list<cudnnBackendNumericalNote_t> notes, bool* readable) {
  *readable = false;
  Desc engine = engine_of(keep, cfg);
  cudnnBackendNumericalNote_t got[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (!engine || cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                          CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, got) != CUDNN_STATUS_SUCCESS)
    return false;
  *readable = true;
  for (int64_t i = 0; i < n; ++i)
    for (cudnnBackendNumericalNote_t want : notes)
      if (got[i] == want) return true;
  return false;
}

// Whether an engine configuration keeps fresco's guarantees: fp32 accumulation and, with `deterministic`
// (FRESCO_CUDNN_DETERMINISTIC, on by default), the same bits on every run (readable notes, no
// reduced-precision reduction, and no non-determinism unless it is admitted).
inline bool qualifies(std::vector<Desc>& keep, Desc cfg, bool deterministic) {
  bool readable = false;
  const bool bad =
      deterministic
          ? has_numerical_note(
                keep, cfg,
                {CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION},
                &readable)
          : has_numerical_note(keep, cfg, {CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION}, &readable);
  return readable && !bad;
}

}  // namespace backend
}  // namespace fresco::cuda

#pragma GCC diagnostic pop
