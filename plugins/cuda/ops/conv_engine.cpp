// cuDNN backend engines for fp16 / bf16 convolutions (conv_engine.h).
#include "ops/conv_engine.h"
#include "ops/scratch_fill.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "ops/channel_moments.h"
#include "ops/cudnn_common.h"

// The backend's handle attributes of operation graphs and execution plans are marked deprecated in cuDNN
// 9.14's headers in favour of a device-properties descriptor; they remain the portable way across cuDNN 9.x.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace fresco::cuda {

namespace {
using Desc = cudnnBackendDescriptor_t;
constexpr int64_t kX = 1, kW = 2, kY = 3;  // tensor uids: x / dx, w / dw, y / dy
constexpr int64_t kSum = 4, kSqSum = 5;    // forward with statistics: per-channel sums of y and y^2

// A descriptor owned by `keep` (destroyed with the plan).
Desc make(std::vector<Desc>& keep, cudnnBackendDescriptorType_t t) {
  Desc d = nullptr;
  FR_CUDNN_CHECK(cudnnBackendCreateDescriptor(t, &d));
  keep.push_back(d);
  return d;
}

template <class T>
void set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n, const T* v) {
  FR_CUDNN_CHECK(cudnnBackendSetAttribute(d, name, type, n, v));
}

// A 4-d tensor descriptor: logical dims [N, C, H, W] with the given strides.
Desc tensor_desc(std::vector<Desc>& keep, int64_t uid, const int64_t (&dims)[4], const int64_t (&strides)[4],
                 cudnnDataType_t t, int64_t align) {
  Desc d = make(keep, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
  set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  FR_CUDNN_CHECK(cudnnBackendFinalize(d));
  return d;
}

// An NHWC tensor (or KRSC filter) given as logical dims [N, C, H, W] with channels-last strides.
Desc nhwc_tensor(std::vector<Desc>& keep, int64_t uid, int64_t n, int64_t c, int64_t h, int64_t w,
                 cudnnDataType_t t) {
  return tensor_desc(keep, uid, {n, c, h, w}, {h * w * c, 1, w * c, c}, t, 16);
}

// A per-channel f32 vector [1, K, 1, 1] (the statistics of a forward with genstats).
Desc channel_vector(std::vector<Desc>& keep, int64_t uid, int64_t k) {
  return tensor_desc(keep, uid, {1, k, 1, 1}, {k, 1, k, k}, CUDNN_DATA_FLOAT, k % 4 == 0 ? 16 : 4);
}

// The genstats operation: per-channel sum and sum of squares of y in f32.
Desc genstats_op(std::vector<Desc>& keep, Desc y, int64_t k) {
  Desc sum = channel_vector(keep, kSum, k), sq = channel_vector(keep, kSqSum, k);
  Desc op = make(keep, CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  const auto B = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, B, 1, &y);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, B, 1, &sum);
  set(op, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, B, 1, &sq);
  FR_CUDNN_CHECK(cudnnBackendFinalize(op));
  return op;
}

// The operation graph of one convolution direction (the forward followed by genstats when `stats`).
Desc conv_graph(std::vector<Desc>& keep, cudnnHandle_t h, const sdk::ConvShape& g, cudnnDataType_t t,
                ConvDir d, bool stats) {
  Desc x = nhwc_tensor(keep, kX, g.n, g.c, g.h, g.w, t);
  Desc w = nhwc_tensor(keep, kW, g.k, g.cg, g.r, g.s, t);
  Desc y = nhwc_tensor(keep, kY, g.n, g.k, g.p, g.q, t);
  Desc conv = make(keep, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t acc = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, dil[2] = {g.dh, g.dw}, stride[2] = {g.sh, g.sw}, pad[2] = {g.ph, g.pw};
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &acc);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
  FR_CUDNN_CHECK(cudnnBackendFinalize(conv));
  const float alpha = 1.0f, beta = 0.0f;
  const auto B = CUDNN_TYPE_BACKEND_DESCRIPTOR;
  // Per direction: the operation type and the attributes that take x (or dx), w (or dw), y (or dy), the
  // convolution, alpha and beta.
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
  Desc op = make(keep, at.type);
  set(op, at.x, B, 1, &x);
  set(op, at.w, B, 1, &w);
  set(op, at.y, B, 1, &y);
  set(op, at.conv, B, 1, &conv);
  set(op, at.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  set(op, at.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  FR_CUDNN_CHECK(cudnnBackendFinalize(op));
  Desc ops[2] = {op, stats ? genstats_op(keep, y, g.k) : nullptr};
  Desc graph = make(keep, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, B, stats ? 2 : 1, ops);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  FR_CUDNN_CHECK(cudnnBackendFinalize(graph));
  return graph;
}

// Up to max_count engine configurations from heuristics mode A (best first), else the fallback list; owned
// by `keep`.
std::vector<Desc> engine_configs(std::vector<Desc>& keep, Desc graph, int64_t max_count) {
  std::vector<Desc> out;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur = make(keep, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (cudnnBackendFinalize(heur) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &count, nullptr) != CUDNN_STATUS_SUCCESS)
      continue;
    count = std::min<int64_t>(count, max_count);
    std::vector<Desc> got;
    for (int64_t i = 0; i < count; ++i) got.push_back(make(keep, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t n = 0;
    if (count > 0 &&
        cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                 &n, got.data()) == CUDNN_STATUS_SUCCESS)
      out.insert(out.end(), got.begin(), got.begin() + n);
    if (!out.empty()) break;  // the fallback list only when mode A offers nothing
  }
  return out;
}

// Whether an engine configuration keeps fresco's guarantees: deterministic, fp32 accumulation.
bool qualifies(std::vector<Desc>& keep, Desc cfg) {
  Desc engine = make(keep, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               &engine) != CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      return false;
  return true;
}

// Scratch operands for timing (na, nb, nc elements of dtype, filled with non-zero values:
// ops/scratch_fill.h), freed on every path.
struct Scratch {
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  float* sums = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  Scratch(FrDType dtype, int64_t na, int64_t nb, int64_t nc, uint64_t wb, uint64_t sums_bytes) {
    const uint64_t elem = 2;  // fp16 / bf16
    FR_CUDA_CHECK(cudaMalloc(&a, elem * na));
    FR_CUDA_CHECK(cudaMalloc(&b, elem * nb));
    FR_CUDA_CHECK(cudaMalloc(&c, elem * nc));
    if (wb) FR_CUDA_CHECK(cudaMalloc(&ws, wb));
    if (sums_bytes) FR_CUDA_CHECK(cudaMalloc(&sums, sums_bytes));
    fill_scratch(dtype, a, na, 1.0f, nullptr);
    fill_scratch(dtype, b, nb, 1.0f, nullptr);
    fill_scratch(dtype, c, nc, 1.0f, nullptr);
    FR_CUDA_CHECK(cudaEventCreate(&e0));
    FR_CUDA_CHECK(cudaEventCreate(&e1));
  }
  ~Scratch() {
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ws), cudaFree(sums);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The operands of one run; `sums` (2K floats: sums, then sums of squares) only for a plan with statistics.
Desc variant_pack(std::vector<Desc>& keep, void* a, void* b, void* c, void* ws, float* sums, int64_t k) {
  Desc vp = make(keep, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t uids[5] = {kX, kW, kY, kSum, kSqSum};
  void* ptrs[5] = {a, b, c, sums, sums ? sums + k : nullptr};
  const int64_t n = sums ? 5 : 3;
  set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
  set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
  set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  FR_CUDNN_CHECK(cudnnBackendFinalize(vp));
  return vp;
}

void destroy_all(std::vector<Desc>& keep) noexcept {
  for (auto it = keep.rbegin(); it != keep.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  keep.clear();
}
}  // namespace

EnginePlan::~EnginePlan() {
  if (plan) cudnnBackendDestroyDescriptor(plan);
  destroy_all(keep);
}

namespace {
// The scratch sums hold 2K floats, then (from this offset) the separate sums pass's workspace.
uint64_t sums_scratch_offset(int64_t k) {
  return (2 * k * sizeof(float) + 255) / 256 * 256;
}

// Milliseconds of the separate sums pass (launch_conv_sums) over the scratch output, best of three.
float time_sums_pass(Scratch& s, FrDType dtype, int64_t rows, int64_t k) {
  void* ws = reinterpret_cast<char*>(s.sums) + sums_scratch_offset(k);
  float best = std::numeric_limits<float>::infinity();
  for (int r = 0; r < 4; ++r) {  // the first is a warm-up
    FR_CUDA_CHECK(cudaEventRecord(s.e0, nullptr));
    launch_conv_sums(dtype, s.c, rows, k, ws, s.sums, nullptr);
    FR_CUDA_CHECK(cudaEventRecord(s.e1, nullptr));
    FR_CUDA_CHECK(cudaEventSynchronize(s.e1));
    float t = 0.0f;
    FR_CUDA_CHECK(cudaEventElapsedTime(&t, s.e0, s.e1));
    if (r > 0) best = std::min(best, t);
  }
  return best;
}

// An execution plan for cfg (owned by `keep`) and its workspace, or a null plan when the configuration does
// not qualify (qualifies), does not finalize or needs more than ws_cap bytes.
struct Finalized {
  Desc plan = nullptr;
  int64_t workspace = 0;
};
Finalized finalize_plan(std::vector<Desc>& keep, cudnnHandle_t h, Desc cfg, uint64_t ws_cap) {
  Finalized f;
  if (!qualifies(keep, cfg)) return f;
  Desc plan = make(keep, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  int64_t ws = 0, n = 0;
  if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               1, &cfg) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                               &ws) != CUDNN_STATUS_SUCCESS ||
      ws < 0 || static_cast<uint64_t>(ws) > ws_cap)
    return f;
  f.plan = plan;
  f.workspace = ws;
  return f;
}

// "engine G (i of n)": the description a tuning-cache entry is checked against (G = cuDNN's global engine
// index, i the configuration's place in the heuristic's list of n).
std::string config_name(std::vector<Desc>& keep, Desc cfg, size_t i, size_t n) {
  Desc engine = make(keep, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t count = 0, global = -1;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count,
                               &global) != CUDNN_STATUS_SUCCESS)
    global = -1;
  return "engine " + std::to_string(global) + " (" + std::to_string(i) + " of " + std::to_string(n) + ")";
}

// The configuration to run: the one the tuning cache holds for this problem on this machine when it is still
// offered, else the fastest qualifying one, each timed on scratch buffers of non-zero values (timing on zeros
// can rank kernels differently from real data), and recorded in the cache so later runs choose the same.
std::shared_ptr<EnginePlan> search_engines(Context* ctx, const sdk::ConvShape& g, FrDType dtype, ConvDir d,
                                           bool stats, uint64_t max_workspace, const std::string& what) {
  cudnnHandle_t h = handle_of(ctx);
  auto best = std::make_shared<EnginePlan>();
  best->stats = stats;
  Desc graph = conv_graph(best->keep, h, g, cudnn_type(dtype), d, stats);
  std::vector<Desc> scratch_keep;  // configurations and the plans that lost
  struct Guard {
    std::vector<Desc>& k;
    ~Guard() { destroy_all(k); }
  } guard{scratch_keep};
  const std::vector<Desc> cfgs = engine_configs(scratch_keep, graph, ctx->conv_engine_candidates);
  const uint64_t ws_cap = max_workspace < (1ull << 30) ? max_workspace : (1ull << 30);
  const int64_t rows = g.n * g.p * g.q;  // of y, for the statistics
  auto keep_plan = [&](Desc plan, int64_t ws, float ms) {
    if (best->plan) scratch_keep.push_back(best->plan);  // the loser is freed with the scratch
    scratch_keep.erase(std::find(scratch_keep.begin(), scratch_keep.end(), plan));
    best->plan = plan;
    best->workspace = static_cast<uint64_t>(ws);
    best->ms = ms;
  };
  const std::string tkey = "conv " + ctx->machine + " " + what + (stats ? " stats" : "") + " candidates " +
                           std::to_string(ctx->conv_engine_candidates) + " ws " + std::to_string(ws_cap);
  const std::optional<TunedChoice> hit = ctx->tuning ? ctx->tuning->find(tkey) : std::nullopt;
  const auto valid_times = [&](const std::vector<float>& ms) {  // the plan's time (and the sums pass's)
    if (ms.size() != (stats ? 2u : 1u)) return false;
    for (float t : ms)
      if (!std::isfinite(t) || t <= 0.0f) return false;
    return true;
  };
  if (hit && valid_times(hit->ms) && hit->index < static_cast<int>(cfgs.size()) &&
      hit->name == config_name(scratch_keep, cfgs[static_cast<size_t>(hit->index)],
                               static_cast<size_t>(hit->index), cfgs.size())) {
    const Finalized f = finalize_plan(scratch_keep, h, cfgs[static_cast<size_t>(hit->index)], ws_cap);
    if (f.plan) {
      keep_plan(f.plan, f.workspace, hit->ms[0]);
      best->sums_pass_ms = stats ? hit->ms[1] : 0.0f;
      if (ctx->conv_log)
        std::fprintf(stderr, "[fresco-cuda] conv engine %s%s: %s %.3f ms (tuning cache)\n", what.c_str(),
                     stats ? " with statistics" : "", hit->name.c_str(), best->ms);
      return best;
    }
  }
  Scratch s(dtype, g.n * g.h * g.w * g.c, g.k * g.r * g.s * g.cg, rows * g.k, ws_cap,
            stats ? sums_scratch_offset(g.k) + conv_sums_workspace(rows, g.k) : 0);
  FR_CUDNN_CHECK(cudnnSetStream(h, nullptr));
  int considered = 0;
  size_t best_index = 0;
  for (size_t i = 0; i < cfgs.size(); ++i) {
    const Finalized f = finalize_plan(scratch_keep, h, cfgs[i], ws_cap);
    if (!f.plan) continue;
    std::vector<Desc> vk;
    struct VpGuard {
      std::vector<Desc>& k;
      ~VpGuard() { destroy_all(k); }
    } vguard{vk};
    Desc vp = variant_pack(vk, s.a, s.b, s.c, s.ws, s.sums, g.k);
    float ms = std::numeric_limits<float>::infinity();
    bool ok = cudnnBackendExecute(h, f.plan, vp) == CUDNN_STATUS_SUCCESS &&
              cudaDeviceSynchronize() == cudaSuccess;  // warm-up (and first-run setup)
    for (int r = 0; r < 3 && ok; ++r) {
      ok = cudaEventRecord(s.e0, nullptr) == cudaSuccess;
      for (int k = 0; k < 3 && ok; ++k) ok = cudnnBackendExecute(h, f.plan, vp) == CUDNN_STATUS_SUCCESS;
      ok = ok && cudaEventRecord(s.e1, nullptr) == cudaSuccess && cudaEventSynchronize(s.e1) == cudaSuccess;
      float t = 0.0f;
      if (ok && cudaEventElapsedTime(&t, s.e0, s.e1) == cudaSuccess) ms = std::min(ms, t / 3.0f);
    }
    if (!ok) {
      (void)cudaGetLastError();
      continue;
    }
    ++considered;
    if (!best->plan || ms < best->ms) {  // the fastest (the first of equal times)
      keep_plan(f.plan, f.workspace, ms);
      best_index = i;
    }
  }
  if (stats && best->plan) best->sums_pass_ms = time_sums_pass(s, dtype, rows, g.k);
  const std::vector<float> times =
      stats ? std::vector<float>{best->ms, best->sums_pass_ms} : std::vector<float>{best->ms};
  if (best->plan && ctx->tuning && valid_times(times))
    ctx->tuning->put(tkey, {static_cast<int>(best_index),
                            config_name(scratch_keep, cfgs[best_index], best_index, cfgs.size()), times});
  if (ctx->conv_log)
    std::fprintf(
        stderr, "[fresco-cuda] conv engine %s%s: %zu configurations, %d qualifying, chosen %.3f ms%s\n",
        what.c_str(), stats ? " with statistics" : "", cfgs.size(), considered, best->plan ? best->ms : -1.0f,
        stats && best->plan
            ? (" (a separate sums pass: " + std::to_string(best->sums_pass_ms) + " ms)").c_str()
            : "");
  if (!best->plan) return nullptr;
  return best;
}
}  // namespace

std::shared_ptr<EnginePlan> plan_conv_engine(Context* ctx, const sdk::ConvShape& g, FrDType dtype, ConvDir d,
                                             bool stats, uint64_t max_workspace, const std::string& what) {
  try {
    return search_engines(ctx, g, dtype, d, stats, max_workspace, what);
  } catch (
      const sdk::KernelError& e) {  // no memory for the scratch buffers, a refused descriptor: legacy API
    (void)cudaGetLastError();
    if (ctx->conv_log)
      std::fprintf(stderr, "[fresco-cuda] conv engine %s: none (%s)\n", what.c_str(), e.what());
    return nullptr;
  }
}

void run_conv_engine(Context* ctx, const EnginePlan& p, void* a, void* b, void* c, void* ws, cudaStream_t s,
                     float* sums, int64_t k) {
  FR_PLUGIN_CHECK(p.stats == (sums != nullptr), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv: a plan with statistics runs with a sums output, and only it");
  cudnnHandle_t h = handle_of(ctx);
  FR_CUDNN_CHECK(cudnnSetStream(h, s));
  std::vector<Desc> keep;
  struct Guard {
    std::vector<Desc>& k;
    ~Guard() { destroy_all(k); }
  } guard{keep};
  Desc vp = variant_pack(keep, a, b, c, ws, sums, k);
  FR_CUDNN_CHECK(cudnnBackendExecute(h, p.plan, vp));
}

}  // namespace fresco::cuda
