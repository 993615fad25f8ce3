// cuDNN convolution plans (conv_plan.h): descriptors, deterministic algorithm choice, the three runs.
#include "ops/conv_plan.h"

#include "ops/channel_moments.h"
#include "ops/conv3x3_wgmma.h"
#include "ops/conv_prologue.h"
#include "ops/cudnn_common.h"
#include "ops/narrow_conv.h"
#include "ops/side_stream_sms.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace fresco::cuda {

namespace {

// fp32 must stay strict fp32: only FMA kernels (CUDNN_DEFAULT_MATH would allow TF32 on Hopper).
bool math_allowed(cudnnMathType_t m, bool fp32) {
  return fp32 ? m == CUDNN_FMA_MATH : m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The first candidate (cuDNN ranks heuristics by expected speed, Find by measured time) that succeeded, is
// deterministic, uses an allowed math mode and fits the workspace; null when none qualifies (what was
// offered is appended to `seen` for the error message).
template <typename Perf>
const Perf* first_qualifying(const Perf* perf, int n, bool fp32, uint64_t max_ws, std::string& seen,
                             bool deterministic = true) {
  for (int i = 0; i < n; ++i) {
    const Perf& c = perf[i];
    seen += " [algo " + std::to_string(static_cast<int>(c.algo)) + " status " + std::to_string(c.status) +
            " det " + std::to_string(c.determinism) + " math " + std::to_string(c.mathType) + " ws " +
            std::to_string(c.memory) + "]";
    if (c.status == CUDNN_STATUS_SUCCESS && (c.determinism == CUDNN_DETERMINISTIC || !deterministic) &&
        math_allowed(c.mathType, fp32) && c.memory <= max_ws)
      return &c;
  }
  return nullptr;
}

// Heuristics give a fixed first choice per machine. With tuning on (the default; FRESCO_CUDNN_AUTOTUNE=0
// turns it off) cuDNN's Find times every algorithm once and the fastest qualifying one replaces the
// heuristic's choice when it is at least 10% faster (a margin that keeps the choice stable across runs).
// Find also widens the list when the heuristics offer nothing that qualifies. One choice per shape and
// direction per context (`cache`), so equal convolutions run the same algorithm.
template <typename Perf, typename Algo, typename Heur, typename Find>
void choose(Context* ctx, Heur heuristics, Find find, int count, bool fp32, uint64_t max_ws,
            const char* direction, const std::string& shape, Algo& algo, cudnnMathType_t& math,
            uint64_t& ws) {
  const std::string key = std::string(direction) + " " + shape;
  auto hit = ctx->conv_choice.find(key);
  if (hit == ctx->conv_choice.end()) {
    const int want = count < 16 ? count : 16;
    Perf h[16], f[16];
    int nh = 0, nf = 0;
    std::string seen = " heuristics:";
    const bool det = ctx->conv_deterministic;
    FR_CUDNN_CHECK(heuristics(want, &nh, h));
    const Perf* chosen = first_qualifying(h, nh, fp32, max_ws, seen, det);
    if (!chosen || ctx->conv_autotune) {
      seen += "; find:";
      FR_CUDNN_CHECK(find(want, &nf, f));
      const Perf* fastest = first_qualifying(f, nf, fp32, max_ws, seen, det);
      if (ctx->conv_log) {
        std::string unused;
        const Perf* any = first_qualifying(f, nf, fp32, max_ws, unused, false);
        std::fprintf(stderr, "[fresco-cuda] conv %s: fastest %s algo %d %.3f ms; fastest of all %d %.3f ms\n",
                     key.c_str(), det ? "deterministic" : "(any)",
                     fastest ? static_cast<int>(fastest->algo) : -1, fastest ? fastest->time : -1.0f,
                     any ? static_cast<int>(any->algo) : -1, any ? any->time : -1.0f);
      }
      if (!chosen) {
        chosen = fastest;
      } else if (fastest) {
        float heuristic_time = -1.0f;  // the heuristic's choice as Find measured it
        for (int i = 0; i < nf; ++i)
          if (f[i].algo == chosen->algo && f[i].mathType == chosen->mathType &&
              f[i].status == CUDNN_STATUS_SUCCESS)
            heuristic_time = f[i].time;
        if (heuristic_time < 0.0f || fastest->time < 0.9f * heuristic_time) chosen = fastest;
      }
    }
    if (!chosen)
      throw sdk::KernelError(FR_ERR_UNSUPPORTED, std::string("cuda conv: cuDNN offers no deterministic ") +
                                                     direction + " algorithm for " + shape + " within " +
                                                     std::to_string(max_ws >> 20) + " MiB of workspace;" +
                                                     seen);
    hit = ctx->conv_choice
              .emplace(key, ConvChoice{static_cast<int>(chosen->algo), static_cast<int>(chosen->mathType),
                                       static_cast<uint64_t>(chosen->memory)})
              .first;
  }
  algo = static_cast<Algo>(hit->second.algo);
  math = static_cast<cudnnMathType_t>(hit->second.math);
  if (hit->second.workspace > ws) ws = hit->second.workspace;
}

// The whole problem (it keys the algorithm and engine caches, so every field that changes the convolution is
// in).
std::string describe(const sdk::ConvShape& g, FrDType t) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "x [" + s(g.n) + "," + s(g.h) + "," + s(g.w) + "," + s(g.c) + "] w [" + s(g.k) + "," + s(g.r) + "," +
         s(g.s) + "," + s(g.cg) + "] y [" + s(g.p) + "," + s(g.q) + "] stride " + s(g.sh) + "x" + s(g.sw) +
         " pad " + s(g.ph) + "x" + s(g.pw) + " dilation " + s(g.dh) + "x" + s(g.dw) + " groups " + s(g.g) +
         " dtype " + std::to_string(t);
}

// The backend engine for one direction, planned once per shape and direction per context (null: none
// qualified, or engines are off for this convolution).
std::shared_ptr<EnginePlan> engine_for(Context* ctx, const sdk::ConvShape& g, FrDType dtype, ConvDir d,
                                       bool stats, const char* direction, const std::string& shape,
                                       uint64_t max_ws) {
  if (dtype == FR_F32 || ctx->conv_engines == 0) return nullptr;  // fp32 stays strict on the legacy API
  const double flops = 2.0 * static_cast<double>(g.n) * g.p * g.q * g.k * g.r * g.s * g.cg;
  if (ctx->conv_engines == 1 && flops < static_cast<double>(1 << 28)) return nullptr;
  const std::string key = std::string(direction) + " " + shape;
  auto hit = ctx->engine_plans.find(key);
  if (hit == ctx->engine_plans.end())
    hit = ctx->engine_plans.emplace(key, plan_conv_engine(ctx, g, dtype, d, stats, max_ws, key)).first;
  return hit->second;
}

// The blocks fresco's Hopper weight gradient may use (ops/side_stream_sms.h; each adds 147 KB of workspace).
int wgrad_blocks(const Context* ctx) {
  return conv3x3_wgrad_blocks(ctx->sm_count, ctx->conv3x3_wgrad_sms);
}

int as_int(int64_t v, const std::string& shape) {
  FR_PLUGIN_CHECK(v > 0 && v <= INT32_MAX, FR_ERR_UNSUPPORTED,
                  "cuda conv: a dimension of " + shape + " exceeds cuDNN's 32-bit range");
  return static_cast<int>(v);
}
}  // namespace

void plan_conv(Context* ctx, ConvPlan& p, const sdk::ConvShape& g, FrDType dtype, unsigned dirs,
               uint64_t max_workspace) {
  const cudnnDataType_t t = cudnn_type(dtype);
  const bool fp32 = dtype == FR_F32;
  const std::string shape = describe(g, dtype);
  cudnnHandle_t h = handle_of(ctx);
  FR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  FR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  FR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  FR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  FR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, t, as_int(g.n, shape), as_int(g.c, shape),
                                            as_int(g.h, shape), as_int(g.w, shape)));
  FR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, t, as_int(g.n, shape), as_int(g.k, shape),
                                            as_int(g.p, shape), as_int(g.q, shape)));
  FR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w, t, CUDNN_TENSOR_NHWC, as_int(g.k, shape),
                                            as_int(g.cg, shape), as_int(g.r, shape), as_int(g.s, shape)));
  FR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      p.conv, static_cast<int>(g.ph), static_cast<int>(g.pw), static_cast<int>(g.sh), static_cast<int>(g.sw),
      static_cast<int>(g.dh), static_cast<int>(g.dw), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  FR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(p.conv, static_cast<int>(g.g)));
  FR_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  int n = 0, c = 0, hh = 0, ww = 0;
  FR_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &hh, &ww));
  FR_PLUGIN_CHECK(n == g.n && c == g.k && hh == g.p && ww == g.q, FR_ERR_INTERNAL,
                  "cuda conv: cuDNN's output shape differs from fresco's for " + shape);
  p.workspace = 0;
  p.dtype = dtype;
  p.shape = g;
  if (ctx->narrow_conv && narrow_conv_fits(g, dtype)) {  // a stem: fresco's kernels, no cuDNN plan
    if (dirs & (kConvForward | kConvForwardSums)) {
      p.narrow_fwd = true;
      p.sums = (dirs & kConvForwardSums) != 0;
      if (p.sums) p.workspace = std::max(p.workspace, narrow_forward_workspace(g));
      dirs &= ~(kConvForward | kConvForwardSums);
    }
    if (dirs & kConvBackwardFilter) {
      p.narrow_wgrad = true;
      p.workspace = std::max(p.workspace, narrow_wgrad_workspace(g));
      dirs &= ~kConvBackwardFilter;
    }
    if (ctx->conv_log && (p.narrow_fwd || p.narrow_wgrad))
      std::fprintf(stderr, "[fresco-cuda] conv %s: narrow kernels for the%s%s\n", shape.c_str(),
                   p.narrow_fwd ? (p.sums ? " forward with sums" : " forward") : "",
                   p.narrow_wgrad ? " weight gradient" : "");
  }
  if (ctx->conv3x3_wgmma && conv3x3_wgmma_fits(g, dtype)) {  // fresco's Hopper kernels, no cuDNN plan
    if (dirs & (kConvForward | kConvForwardSums)) {
      p.wgmma_fwd = true;
      p.sums = (dirs & kConvForwardSums) != 0;
      if (p.sums) p.workspace = std::max(p.workspace, conv3x3_wgmma_partials_bytes(ctx->sm_count));
      dirs &= ~(kConvForward | kConvForwardSums);
    }
    if (dirs & kConvBackwardData) {
      p.wgmma_data = true;
      dirs &= ~kConvBackwardData;
    }
    if ((dirs & kConvBackwardFilter) && ctx->conv3x3_wgmma >= 2) {
      p.wgmma_filter = true;
      p.workspace = std::max(p.workspace, conv3x3_wgmma_wgrad_workspace(g, wgrad_blocks(ctx)));
      dirs &= ~kConvBackwardFilter;
    }
    if (ctx->conv_log && (p.wgmma_fwd || p.wgmma_data || p.wgmma_filter))
      std::fprintf(stderr, "[fresco-cuda] conv %s: wgmma kernels for the%s%s%s\n", shape.c_str(),
                   p.wgmma_fwd ? (p.sums ? " forward with sums" : " forward") : "",
                   p.wgmma_data ? " input gradient" : "", p.wgmma_filter ? " weight gradient" : "");
  }
  auto engine = [&](ConvDir d, const char* direction, bool stats = false) {
    std::shared_ptr<EnginePlan> e = engine_for(ctx, g, dtype, d, stats, direction, shape, max_workspace);
    if (e && e->workspace > p.workspace) p.workspace = e->workspace;
    return e;
  };
  if (dirs & kConvForward) p.engine_fwd = engine(ConvDir::FORWARD, "forward");
  if (dirs & kConvForwardSums) {
    p.sums = true;
    p.rows = g.n * g.p * g.q;
    p.k = g.k;
    p.workspace = std::max(p.workspace, conv_sums_workspace(p.rows, p.k));
    // genstats where it beats the plain engine plus the separate pass (FRESCO_CUDNN_GENSTATS)
    if (p.engine_fwd && ctx->conv_genstats > 0) {
      std::shared_ptr<EnginePlan> e = engine(ConvDir::FORWARD, "forward+sums", true);
      if (e && (ctx->conv_genstats == 2 || e->ms < p.engine_fwd->ms + e->sums_pass_ms))
        p.engine_fwd_stats = e;
    }
  }
  if (dirs & kConvBackwardData) p.engine_data = engine(ConvDir::BACKWARD_DATA, "backward-data");
  if (dirs & kConvBackwardFilter) p.engine_filter = engine(ConvDir::BACKWARD_FILTER, "backward-filter");
  if ((dirs & kConvForward) && !p.engine_fwd)
    choose<cudnnConvolutionFwdAlgoPerf_t>(
        ctx,
        [&](int want, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
          return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, want, got, r);
        },
        [&](int want, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
          return cudnnFindConvolutionForwardAlgorithm(h, p.x, p.w, p.conv, p.y, want, got, r);
        },
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, fp32, max_workspace, "forward", shape, p.fwd, p.fwd_math,
        p.workspace);
  if ((dirs & kConvBackwardData) && !p.engine_data)
    choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        ctx,
        [&](int want, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x, want, got, r);
        },
        [&](int want, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
          return cudnnFindConvolutionBackwardDataAlgorithm(h, p.w, p.y, p.conv, p.x, want, got, r);
        },
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, fp32, max_workspace, "backward-data", shape, p.bwd_data,
        p.data_math, p.workspace);
  if ((dirs & kConvBackwardFilter) && !p.engine_filter)
    choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        ctx,
        [&](int want, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w, want, got, r);
        },
        [&](int want, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
          return cudnnFindConvolutionBackwardFilterAlgorithm(h, p.x, p.y, p.conv, p.w, want, got, r);
        },
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, fp32, max_workspace, "backward-filter", shape, p.bwd_filter,
        p.filter_math, p.workspace);
}

namespace {
// The forward convolution alone (engine or legacy algorithm).
void run_conv_plain_forward(Context* ctx, const ConvPlan& p, const void* x, const void* w, void* y, void* ws,
                            uint64_t ws_bytes, cudaStream_t s) {
  if (p.engine_fwd)
    return run_conv_engine(ctx, *p.engine_fwd, const_cast<void*>(x), const_cast<void*>(w), y, ws, s);
  const float one = 1.0f, zero = 0.0f;
  FR_CUDNN_CHECK(cudnnSetStream(ctx->dnn, s));
  FR_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.fwd_math));
  FR_CUDNN_CHECK(
      cudnnConvolutionForward(ctx->dnn, &one, p.x, x, p.w, w, p.conv, p.fwd, ws, ws_bytes, &zero, p.y, y));
}

}  // namespace

void run_conv_forward(Context* ctx, const ConvPlan& p, const void* x, const void* w, void* y, void* ws,
                      uint64_t ws_bytes, cudaStream_t s, float* sums, const sdk::BnPrologue* bn,
                      void* applied, const void* residual) {
  FR_PLUGIN_CHECK(ws_bytes >= p.workspace, FR_ERR_INVALID_ARGUMENT, "cuda conv: workspace too small");
  FR_PLUGIN_CHECK(p.sums == (sums != nullptr), FR_ERR_INVALID_ARGUMENT,
                  "cuda conv: the sums output differs from the one prepared");
  FR_PLUGIN_CHECK(!bn == !applied, FR_ERR_INVALID_ARGUMENT,
                  "cuda conv: a batchnorm prologue needs its applied map, and only it");
  FR_PLUGIN_CHECK(!residual || bn, FR_ERR_INVALID_ARGUMENT,
                  "cuda conv: a join prologue's residual needs its batchnorm");
  if (p.wgmma_fwd) {
    auto* part = static_cast<double*>(sums ? ws : nullptr);
    const int blocks = launch_conv3x3_wgmma_forward(p.shape, p.dtype, x, w, y, part, ctx->sm_count, s,
                                                    kConv3x3Schedule, bn, applied, residual);
    if (sums) launch_sums_finalize(ctx, blocks, p.shape.k, part, sums, s);
    return;
  }
  if (bn) {  // the prologue as a pass of its own, then the convolution on its map
    launch_conv_prologue(p.dtype, x, applied, p.shape.n * p.shape.h * p.shape.w, p.shape.c, *bn, s, residual);
    x = applied;
  }
  if (p.narrow_fwd) return launch_narrow_forward(ctx, p.shape, p.dtype, x, w, y, sums, ws, s);
  if (p.engine_fwd_stats)
    return run_conv_engine(ctx, *p.engine_fwd_stats, const_cast<void*>(x), const_cast<void*>(w), y, ws, s,
                           sums, p.k);
  run_conv_plain_forward(ctx, p, x, w, y, ws, ws_bytes, s);
  if (sums) launch_conv_sums(ctx, p.dtype, y, p.rows, p.k, ws, sums, s);  // the convolution is done with ws
}

void run_conv_backward_data(Context* ctx, const ConvPlan& p, const void* dy, const void* w, void* dx,
                            void* ws, uint64_t ws_bytes, cudaStream_t s) {
  FR_PLUGIN_CHECK(ws_bytes >= p.workspace, FR_ERR_INVALID_ARGUMENT, "cuda conv: workspace too small");
  if (p.wgmma_data) {
    launch_conv3x3_wgmma_backward_data(p.shape, p.dtype, dy, w, dx, ctx->sm_count, s);
    return;
  }
  if (p.engine_data)
    return run_conv_engine(ctx, *p.engine_data, dx, const_cast<void*>(w), const_cast<void*>(dy), ws, s);
  const float one = 1.0f, zero = 0.0f;
  FR_CUDNN_CHECK(cudnnSetStream(ctx->dnn, s));
  FR_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.data_math));
  FR_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx->dnn, &one, p.w, w, p.y, dy, p.conv, p.bwd_data, ws,
                                              ws_bytes, &zero, p.x, dx));
}

void run_conv_backward_filter(Context* ctx, const ConvPlan& p, const void* dy, const void* x, void* dw,
                              void* ws, uint64_t ws_bytes, cudaStream_t s) {
  FR_PLUGIN_CHECK(ws_bytes >= p.workspace, FR_ERR_INVALID_ARGUMENT, "cuda conv: workspace too small");
  if (p.narrow_wgrad) return launch_narrow_wgrad(p.shape, p.dtype, dy, x, dw, ws, s);
  if (p.wgmma_filter)
    return launch_conv3x3_wgmma_backward_filter(p.shape, p.dtype, dy, x, dw, ws, wgrad_blocks(ctx), s);
  if (p.engine_filter)
    return run_conv_engine(ctx, *p.engine_filter, const_cast<void*>(x), dw, const_cast<void*>(dy), ws, s);
  const float one = 1.0f, zero = 0.0f;
  FR_CUDNN_CHECK(cudnnSetStream(ctx->dnn, s));
  FR_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.filter_math));
  FR_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx->dnn, &one, p.x, x, p.y, dy, p.conv, p.bwd_filter, ws,
                                                ws_bytes, &zero, p.w, dw));
}

void destroy_conv(ConvPlan& p) noexcept {
  if (p.x) cudnnDestroyTensorDescriptor(p.x);
  if (p.y) cudnnDestroyTensorDescriptor(p.y);
  if (p.w) cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) cudnnDestroyConvolutionDescriptor(p.conv);
  p = ConvPlan{};
}

FrError* conv_prepare_state(void* ctx, const FrCall* call, const char* op, const FrConvParams& params,
                            const FrTensor& x, const FrTensor& w, const FrTensor& y, unsigned dirs,
                            void** state, uint64_t* workspace_bytes) noexcept {
  (void)call;
  return sdk::guard([&] {
    constexpr uint64_t kMaxWorkspace = 4ull << 30;  // fp32 NHWC backward-data needs ~2x dx
    const sdk::ConvShape g = sdk::conv_shape(op, params, x, w, y);
    FR_PLUGIN_CHECK(x.dtype == w.dtype && x.dtype == y.dtype, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": x, w and y must share one dtype");
    auto* plan = new ConvPlan();
    try {
      plan_conv(ctx_of(ctx), *plan, g, static_cast<FrDType>(x.dtype), dirs, kMaxWorkspace);
    } catch (...) {
      destroy_conv(*plan);
      delete plan;
      throw;
    }
    *state = plan;
    *workspace_bytes = plan->workspace;
  });
}

void conv_destroy_state(void* state) noexcept {
  auto* plan = static_cast<ConvPlan*>(state);
  if (!plan) return;
  destroy_conv(*plan);
  delete plan;
}

}  // namespace fresco::cuda
