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
#include "ops/side_stream_sms.h"

// The execution plan's handle attribute is deprecated in cuDNN 9.14's headers (ops/cudnn_backend.h says why
// it is still used).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace fresco::cuda {

namespace {
using backend::Desc;
using backend::destroy_all;
using backend::make;
using backend::nhwc_tensor;
using backend::set;
constexpr int64_t kX = 1, kW = 2, kY = 3;  // tensor uids: x / dx, w / dw, y / dy
constexpr int64_t kSum = 4, kSqSum = 5;    // forward with statistics: per-channel sums of y and y^2

// The genstats operation: per-channel sum and sum of squares of y in f32.
Desc genstats_op(std::vector<Desc>& keep, Desc y, int64_t k) {
  return backend::genstats_operation(keep, y, backend::channel_vector(keep, kSum, k),
                                     backend::channel_vector(keep, kSqSum, k));
}

// The operation graph of one convolution direction (the forward followed by genstats when `stats`).
Desc conv_graph(std::vector<Desc>& keep, cudnnHandle_t h, const sdk::ConvShape& g, cudnnDataType_t t,
                ConvDir d, bool stats) {
  Desc x = nhwc_tensor(keep, kX, g.n, g.c, g.h, g.w, t);
  Desc w = nhwc_tensor(keep, kW, g.k, g.cg, g.r, g.s, t);
  Desc y = nhwc_tensor(keep, kY, g.n, g.k, g.p, g.q, t);
  Desc conv = backend::conv_descriptor(keep, {g.ph, g.pw}, {g.sh, g.sw}, {g.dh, g.dw});
  const Desc op = backend::conv_operation(keep, d, x, w, y, conv);
  if (!stats) return backend::operation_graph(keep, h, {op});
  return backend::operation_graph(keep, h, {op, genstats_op(keep, y, g.k)});
}

// Scratch operands for timing (na, nb, nc elements of dtype, filled with non-zero values:
// ops/scratch_fill.h), freed on every path.
struct Scratch {
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  float* sums = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  Scratch(FrDType dtype, int64_t na, int64_t nb, int64_t nc, uint64_t wb, uint64_t sums_bytes) {
    try {                       // a failed allocation frees the earlier ones (the destructor does not run)
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
    } catch (...) {
      release();
      throw;
    }
  }
  ~Scratch() { release(); }
  void release() noexcept {
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(ws), cudaFree(sums);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    a = b = c = ws = nullptr, sums = nullptr, e0 = e1 = nullptr;
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
    // (plain launches and the 16-channel finalize on the legacy stream: within a microsecond of the step's
    // form)
    launch_conv_sums(nullptr, dtype, s.c, rows, k, ws, s.sums, nullptr);
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
Finalized finalize_plan(std::vector<Desc>& keep, cudnnHandle_t h, Desc cfg, uint64_t ws_cap,
                        bool deterministic) {
  Finalized f;
  if (!backend::qualifies(keep, cfg, deterministic)) return f;
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
  return "engine " + std::to_string(backend::engine_index(keep, cfg)) + " (" + std::to_string(i) + " of " +
         std::to_string(n) + ")";
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
  const int32_t sms =
      d == ConvDir::BACKWARD_FILTER
          ? cudnn_wgrad_sm_target(ctx->sm_count, ctx->memory_gbs, ctx->cudnn_wgrad_sms, dtype == FR_F16)
          : 0;
  const std::vector<Desc> cfgs =
      backend::engine_configs(scratch_keep, graph, ctx->conv_engine_candidates, sms);
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
                           std::to_string(ctx->conv_engine_candidates) + " ws " + std::to_string(ws_cap) +
                           (sms ? " sms " + std::to_string(sms) : std::string()) +
                           (ctx->conv_deterministic ? "" : " nondeterministic");
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
    const Finalized f = finalize_plan(scratch_keep, h, cfgs[static_cast<size_t>(hit->index)], ws_cap,
                                      ctx->conv_deterministic);
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
    const Finalized f = finalize_plan(scratch_keep, h, cfgs[i], ws_cap, ctx->conv_deterministic);
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
    if (ctx->conv_log >= 2) {  // every timed candidate (scripts/tune_step.py --convs: its cache key last)
      std::fprintf(stderr, "[fresco-cuda]   conv candidate #%zu\t%s\t%.3f us\t%s\n", i,
                   config_name(scratch_keep, cfgs[i], i, cfgs.size()).c_str(), ms * 1000.0f, tkey.c_str());
      // its knob choices (tile sizes, clusters: docs/decisions.md "cuDNN engines that tie")
      std::string line;
      for (const auto& [type, value] : backend::knob_choices(scratch_keep, cfgs[i]))
        line += (line.empty() ? "" : " ") + std::to_string(type) + "=" + std::to_string(value);
      std::fprintf(stderr, "[fresco-cuda]   conv knobs #%zu\t%s\n", i, line.c_str());
    }
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
