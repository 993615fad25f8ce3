// Probe: which cuDNN backend (graph API) convolution patterns around batchnorm this machine's cuDNN offers
// for NHWC fp16 / bf16, and how fast each is against the plain convolution, on ResNet-18's CIFAR shapes
// (3x3, stride 1, pad 1) at a given batch. A diagnostic for choosing fusions (docs/performance.md), not part
// of the product: it links only cuDNN and the CUDA runtime.
//
// Patterns (each timed over every engine configuration heuristics mode A offers, then the fallback list):
//   fwd            conv forward
//   fwd_stats      conv forward + genstats (per-channel sum and sum of squares of y)
//   sbr_fwd_stats  relu(x * scale + bias) -> conv forward -> y, + genstats    (batchnorm apply as a prologue)
//   sbr16_fwd_stats  the same with scale and bias in the map's dtype (the pre-compiled ConvBNfprop's form)
//   sbr_fwd        relu(x * scale + bias) -> conv forward -> y
//   wgrad          conv backward-filter
//   sbr_wgrad      relu(x * scale + bias) -> conv backward-filter              (the prologue recomputed)
//   sbr16_wgrad    the same with scale and bias in the map's dtype
//   dgrad          conv backward-data
//   dgrad_drelu    conv backward-data -> relu backward against the batchnorm output recomputed from its
//                  input x, mean, invstd, gamma and beta -> dz
//   dgrad_drelu_bnw  dgrad_drelu + batchnorm backward weights (dscale, dbias and the dx coefficients)
//   wgrad_smN      conv backward-filter with heuristics targeting N SMs
//   (CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET)
// One JSON line per (shape, dtype, pattern): configurations offered, finalized, timed; the fastest qualifying
// (deterministic, no reduced-precision reduction) and the fastest of any, with their engine indices and
// whether they compile at run time.
// Usage: bench_cudnn_fusion_probe [--batch 512] [--dtypes fp16,bf16] [--patterns all|name,name] [--sms
// 66,100]
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/cudnn_backend.h"

// The execution plan's handle attribute is deprecated in cuDNN 9.14's headers (ops/cudnn_backend.h).
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {
using fresco::cuda::ConvDir;
using fresco::cuda::backend::Desc;
using fresco::cuda::backend::kDesc;
using fresco::cuda::backend::make;
using fresco::cuda::backend::set;
namespace be = fresco::cuda::backend;

struct Fail : std::runtime_error {
  using std::runtime_error::runtime_error;
};
#define CUDA(expr)                                                                                       \
  do {                                                                                                   \
    const cudaError_t e_ = (expr);                                                                       \
    if (e_ != cudaSuccess) throw Fail(std::string(#expr).substr(0, 60) + ": " + cudaGetErrorString(e_)); \
  } while (0)

// Descriptors destroyed together.
struct Keep {
  std::vector<Desc> d;
  Keep() = default;
  Keep(const Keep&) = delete;
  Keep& operator=(const Keep&) = delete;
  ~Keep() { be::destroy_all(d); }
};

// A tensor of the graph: its uid, element count and dtype (for the buffers of a run); virtual ones have none.
struct TensorInfo {
  int64_t uid, elems;
  cudnnDataType_t type;
  bool is_virtual;
};

struct Graph {
  Keep keep;
  std::vector<Desc> ops;
  std::vector<TensorInfo> tensors;
  int64_t next_uid = 1;
  cudnnDataType_t io;  // map dtype

  // NHWC map given as [N, C, H, W]
  Desc map(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t t, bool virt = false) {
    tensors.push_back({next_uid, n * c * h * w, t, virt});
    return be::nhwc_tensor(keep.d, next_uid++, n, c, h, w, t, virt);
  }
  Desc channel(int64_t c, cudnnDataType_t t = CUDNN_DATA_FLOAT) {
    tensors.push_back({next_uid, c, t, false});
    return be::channel_vector(keep.d, next_uid++, c, t);
  }

  // A pointwise operation in f32: y = mode(x, b) (b may be null), or with dy given the backward form
  // dx (written to y) = mode(dy, x).
  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc y, float alpha2 = 1.0f, Desc dy = nullptr) {
    Desc pw = make(keep.d, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    FR_CUDNN_CHECK(cudnnBackendFinalize(pw));
    Desc op = make(keep.d, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, kDesc, 1, &pw);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, kDesc, 1, &x);
    if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, kDesc, 1, &b);
    if (dy) {
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, kDesc, 1, &dy);
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, kDesc, 1, &y);
    } else {
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, kDesc, 1, &y);
    }
    if (alpha2 != 1.0f) {
      const float alpha1 = 1.0f;
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha1);
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha2);
    }
    FR_CUDNN_CHECK(cudnnBackendFinalize(op));
    ops.push_back(op);
  }
  // x' = relu(x * scale + bias): the batchnorm apply with its relu, on virtual f32 tensors; scale and bias
  // in f32, or in the map's dtype when `io_coefficients` (what the pre-compiled ConvBNfprop engines take).
  Desc sbr(Desc x, int64_t n, int64_t c, int64_t h, int64_t w, bool io_coefficients = false) {
    Desc scale = channel(c, io_coefficients ? io : CUDNN_DATA_FLOAT);
    Desc bias = channel(c, io_coefficients ? io : CUDNN_DATA_FLOAT);
    Desc t1 = map(n, c, h, w, CUDNN_DATA_FLOAT, true), t2 = map(n, c, h, w, CUDNN_DATA_FLOAT, true);
    Desc t3 = map(n, c, h, w, CUDNN_DATA_FLOAT, true);
    pointwise(CUDNN_POINTWISE_MUL, x, scale, t1);
    pointwise(CUDNN_POINTWISE_ADD, t1, bias, t2);
    pointwise(CUDNN_POINTWISE_RELU_FWD, t2, nullptr, t3);
    return t3;
  }
  // A 3x3, stride 1, pad 1 convolution of direction d (a, b, c as in be::conv_operation).
  void conv(ConvDir d, Desc a, Desc b, Desc c) {
    ops.push_back(
        be::conv_operation(keep.d, d, a, b, c, be::conv_descriptor(keep.d, {1, 1}, {1, 1}, {1, 1})));
  }
  void genstats(Desc y, int64_t k) {
    Desc sum = channel(k), sq = channel(k);
    ops.push_back(be::genstats_operation(keep.d, y, sum, sq));
  }
  // Batchnorm backward weights over x (the batchnorm's input) and dy (its output gradient): dscale, dbias and
  // the coefficients of dx = eq_dy_scale * dy + eq_x_scale * x + eq_bias.
  void bn_bwd_weights(Desc x, Desc dy, int64_t c) {
    Desc mean = channel(c), invstd = channel(c), scale = channel(c);
    Desc dscale = channel(c), dbias = channel(c), eq_dy = channel(c), eq_x = channel(c), eq_b = channel(c);
    Desc op = make(keep.d, CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, kDesc, 1, &mean);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, kDesc, 1, &invstd);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, kDesc, 1, &scale);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, kDesc, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, kDesc, 1, &dy);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, kDesc, 1, &dscale);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, kDesc, 1, &dbias);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, kDesc, 1, &eq_dy);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, kDesc, 1, &eq_x);
    set(op, CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, kDesc, 1, &eq_b);
    FR_CUDNN_CHECK(cudnnBackendFinalize(op));
    ops.push_back(op);
  }
  Desc finalize(cudnnHandle_t h) { return be::operation_graph(keep.d, h, ops); }
};

// Builds pattern `name` for maps [n, c, hw, hw] -> [n, c, hw, hw] with a 3x3 filter.
void build(Graph& g, const std::string& name, int64_t n, int64_t c, int64_t hw) {
  const cudnnDataType_t t = g.io;
  const bool io_coef = name.rfind("sbr16", 0) == 0;  // scale and bias in the map's dtype
  if (name == "fwd" || name == "fwd_stats" || name == "sbr_fwd" || name == "sbr_fwd_stats" ||
      name == "sbr16_fwd_stats") {
    Desc x = g.map(n, c, hw, hw, t), w = g.map(c, c, 3, 3, t), y = g.map(n, c, hw, hw, t);
    const bool pro = name.rfind("sbr", 0) == 0;
    g.conv(ConvDir::FORWARD, pro ? g.sbr(x, n, c, hw, hw, io_coef) : x, w, y);
    if (name.find("stats") != std::string::npos) g.genstats(y, c);
  } else if (name == "wgrad" || name == "sbr_wgrad" || name == "sbr16_wgrad" ||
             name.rfind("wgrad_sm", 0) == 0) {
    Desc x = g.map(n, c, hw, hw, t), dw = g.map(c, c, 3, 3, t), dy = g.map(n, c, hw, hw, t);
    const bool pro = name.rfind("sbr", 0) == 0;
    g.conv(ConvDir::BACKWARD_FILTER, pro ? g.sbr(x, n, c, hw, hw, io_coef) : x, dw, dy);
  } else if (name == "dgrad") {
    Desc dx = g.map(n, c, hw, hw, t), w = g.map(c, c, 3, 3, t), dy = g.map(n, c, hw, hw, t);
    g.conv(ConvDir::BACKWARD_DATA, dx, w, dy);
  } else if (name == "dgrad_drelu" || name == "dgrad_drelu_bnw") {
    // dgrad into a virtual f32 map, relu backward against the recomputed batchnorm output x*scale+bias
    Desc dxv = g.map(n, c, hw, hw, CUDNN_DATA_FLOAT, true), w = g.map(c, c, 3, 3, t);
    Desc dy = g.map(n, c, hw, hw, t);
    g.conv(ConvDir::BACKWARD_DATA, dxv, w, dy);
    // the batchnorm output recomputed as ((x - mean) * invstd) * gamma + beta (the chain cuDNN's
    // DgradDreluBNBwdWeight engines match)
    Desc x = g.map(n, c, hw, hw, t), mean = g.channel(c), invstd = g.channel(c), gamma = g.channel(c),
         beta = g.channel(c);
    Desc t1 = g.map(n, c, hw, hw, CUDNN_DATA_FLOAT, true), t2 = g.map(n, c, hw, hw, CUDNN_DATA_FLOAT, true);
    Desc t3 = g.map(n, c, hw, hw, CUDNN_DATA_FLOAT, true), t4 = g.map(n, c, hw, hw, CUDNN_DATA_FLOAT, true);
    g.pointwise(CUDNN_POINTWISE_ADD, x, mean, t1, -1.0f);
    g.pointwise(CUDNN_POINTWISE_MUL, t1, invstd, t2);
    g.pointwise(CUDNN_POINTWISE_MUL, t2, gamma, t3);
    g.pointwise(CUDNN_POINTWISE_ADD, t3, beta, t4);
    Desc dz = g.map(n, c, hw, hw, t);
    g.pointwise(CUDNN_POINTWISE_RELU_BWD, t4, nullptr, dz, 1.0f, dxv);
    if (name == "dgrad_drelu_bnw") g.bn_bwd_weights(x, dz, c);
  } else {
    throw Fail("unknown pattern " + name);
  }
}

struct Result {
  int offered = 0, finalized = 0, timed = 0;
  float best_q = -1, best_any = -1;  // ms
  int64_t eng_q = -1, eng_any = -1;
  bool rtc_q = false, rtc_any = false;
  std::string error;
};

// Whether the engine of cfg compiles its kernel at run time (CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION).
bool compiles_at_run_time(std::vector<Desc>& keep, Desc cfg) {
  Desc e = be::engine_of(keep, cfg);
  cudnnBackendBehaviorNote_t v[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (!e || cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, v) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (v[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return true;
  return false;
}

size_t dtype_bytes(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT ? 4 : 2;
}

// Fills n elements of type t with values in [0.5, 1.5) (f32 per-channel operands: the same range).
void fill(void* p, int64_t n, cudnnDataType_t t, uint32_t seed) {
  std::vector<uint16_t> h16;
  std::vector<float> h32;
  uint32_t s = seed * 2654435761u + 1u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return 0.5f + static_cast<float>(s >> 8) / 16777216.0f;
  };
  if (t == CUDNN_DATA_FLOAT) {
    h32.resize(static_cast<size_t>(n));
    for (auto& v : h32) v = next();
    CUDA(cudaMemcpy(p, h32.data(), 4 * n, cudaMemcpyHostToDevice));
    return;
  }
  h16.resize(static_cast<size_t>(n));
  for (auto& v : h16) {
    float f = next() - 1.0f;  // [-0.5, 0.5): relu masks see both signs
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (t == CUDNN_DATA_BFLOAT16) {
      v = static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
    } else {  // f16 from a float in (-1, 1): exact enough for timing data
      const uint32_t sign = (b >> 16) & 0x8000u;
      const float a = std::fabs(f);
      if (a < 6.1e-5f) {
        v = static_cast<uint16_t>(sign);
      } else {
        int e;
        const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
        const int he = e - 1 + 15;
        const uint32_t mant = static_cast<uint32_t>((m * 2.0f - 1.0f) * 1024.0f + 0.5f);
        v = static_cast<uint16_t>(sign | (static_cast<uint32_t>(he) << 10) | std::min(mant, 1023u));
      }
    }
  }
  CUDA(cudaMemcpy(p, h16.data(), 2 * n, cudaMemcpyHostToDevice));
}

Result probe(cudnnHandle_t h, const std::string& pattern, cudnnDataType_t t, int64_t n, int64_t c,
             int64_t hw) {
  Result r;
  Graph g;
  g.io = t;
  std::vector<void*> bufs;
  void* ws = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  try {
    build(g, pattern, n, c, hw);
    Desc graph = g.finalize(h);
    int sm_target = 0;
    if (pattern.rfind("wgrad_sm", 0) == 0) sm_target = std::atoi(pattern.c_str() + 8);
    Keep k;
    std::vector<Desc> cfgs = be::engine_configs(k.d, graph, 96, sm_target);
    r.offered = static_cast<int>(cfgs.size());
    std::vector<int64_t> uids;
    for (const TensorInfo& ti : g.tensors) {
      if (ti.is_virtual) continue;
      void* p = nullptr;
      CUDA(cudaMalloc(&p, dtype_bytes(ti.type) * ti.elems));
      fill(p, ti.elems, ti.type, static_cast<uint32_t>(ti.uid));
      bufs.push_back(p);
      uids.push_back(ti.uid);
    }
    const size_t ws_cap = 512ull << 20;
    CUDA(cudaMalloc(&ws, ws_cap));
    CUDA(cudaEventCreate(&e0));
    CUDA(cudaEventCreate(&e1));
    for (Desc cfg : cfgs) {
      Desc plan = make(k.d, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      int64_t wsz = 0, cnt = 0;
      if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) !=
              CUDNN_STATUS_SUCCESS ||
          cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, kDesc, 1, &cfg) !=
              CUDNN_STATUS_SUCCESS ||
          cudnnBackendFinalize(plan) != CUDNN_STATUS_SUCCESS ||
          cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt,
                                   &wsz) != CUDNN_STATUS_SUCCESS ||
          wsz < 0 || static_cast<size_t>(wsz) > ws_cap)
        continue;
      ++r.finalized;
      Keep vk;
      Desc vp = make(vk.d, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
          uids.data());
      set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(bufs.size()),
          bufs.data());
      set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
      FR_CUDNN_CHECK(cudnnBackendFinalize(vp));
      bool ok =
          cudnnBackendExecute(h, plan, vp) == CUDNN_STATUS_SUCCESS && cudaDeviceSynchronize() == cudaSuccess;
      float ms = std::numeric_limits<float>::infinity();
      for (int rep = 0; rep < 3 && ok; ++rep) {
        ok = cudaEventRecord(e0, nullptr) == cudaSuccess;
        for (int i = 0; i < 5 && ok; ++i) ok = cudnnBackendExecute(h, plan, vp) == CUDNN_STATUS_SUCCESS;
        ok = ok && cudaEventRecord(e1, nullptr) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess;
        float tt = 0;
        if (ok && cudaEventElapsedTime(&tt, e0, e1) == cudaSuccess) ms = std::min(ms, tt / 5.0f);
      }
      if (!ok) {
        (void)cudaGetLastError();
        continue;
      }
      ++r.timed;
      const bool q = be::qualifies(k.d, cfg, true), rtc = compiles_at_run_time(k.d, cfg);
      if (r.best_any < 0 || ms < r.best_any)
        r.best_any = ms, r.eng_any = be::engine_index(k.d, cfg), r.rtc_any = rtc;
      if (q && (r.best_q < 0 || ms < r.best_q))
        r.best_q = ms, r.eng_q = be::engine_index(k.d, cfg), r.rtc_q = rtc;
    }
  } catch (const std::exception& f) {  // Fail, and the helpers' sdk::KernelError
    r.error = f.what();
    (void)cudaGetLastError();
  }
  for (void* p : bufs) cudaFree(p);
  cudaFree(ws);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  return r;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"batch", "512"}, {"dtypes", "fp16,bf16"}, {"patterns", "all"}, {"sms", "66,100"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) {
      std::fprintf(stderr, "usage: %s [--batch N] [--dtypes fp16,bf16] [--patterns all|a,b] [--sms 66,100]\n",
                   argv[0]);
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  std::vector<std::string> patterns = {"fwd",     "fwd_stats",   "sbr_fwd_stats",  "sbr16_fwd_stats",
                                       "sbr_fwd", "wgrad",       "sbr_wgrad",      "sbr16_wgrad",
                                       "dgrad",   "dgrad_drelu", "dgrad_drelu_bnw"};
  for (const std::string& s : split(a["sms"])) patterns.push_back("wgrad_sm" + s);
  if (a["patterns"] != "all") patterns = split(a["patterns"]);
  const int64_t n = std::atoll(a["batch"].c_str());
  cudnnHandle_t h = nullptr;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "cudnnCreate failed (no GPU?)\n");
    return 1;
  }
  std::printf("{\"probe\":\"cudnn_fusion\",\"cudnn_version\":%zu}\n", cudnnGetVersion());
  const int64_t shapes[4][2] = {{64, 32}, {128, 16}, {256, 8}, {512, 4}};
  for (const std::string& dt : split(a["dtypes"])) {
    const cudnnDataType_t t = dt == "bf16" ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    for (const auto& s : shapes) {
      for (const std::string& p : patterns) {
        const Result r = probe(h, p, t, n, s[0], s[1]);
        std::printf(
            "{\"dtype\":\"%s\",\"c\":%ld,\"hw\":%ld,\"pattern\":\"%s\",\"offered\":%d,\"finalized\":%d,"
            "\"timed\":%d,\"best_ms\":%.4f,\"engine\":%ld,\"rtc\":%d,\"best_any_ms\":%.4f,\"engine_any\":%ld,"
            "\"rtc_any\":%d%s%s%s}\n",
            dt.c_str(), static_cast<long>(s[0]), static_cast<long>(s[1]), p.c_str(), r.offered, r.finalized,
            r.timed, r.best_q, static_cast<long>(r.eng_q), r.rtc_q ? 1 : 0, r.best_any,
            static_cast<long>(r.eng_any), r.rtc_any ? 1 : 0, r.error.empty() ? "" : ",\"error\":\"",
            r.error.c_str(), r.error.empty() ? "" : "\"");
        std::fflush(stdout);
      }
    }
  }
  cudnnDestroy(h);
  return 0;
}
