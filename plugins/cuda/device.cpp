// CUDA device API: one context per device (cuBLASLt handle), cudaMalloc arena (zero-filled), pinned host
// staging, non-blocking streams, events, async copies and native CUDA Graph capture (thread-local capture
// mode, so another thread's CUDA calls do not break a capture). Tested by tests/plugins/cuda (skipped without
// a GPU).
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cuda_common.h"
#include "graph/memset_nodes.h"
#include "ops/conv3x3_wgmma.h"

namespace fresco::cuda {

namespace {
int32_t device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report zero, clear the sticky error
    return 0;
  }
  return n;
}

// A whole number lo..hi from the environment (`fallback` when unset); anything else is a clear error.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  FR_PLUGIN_CHECK(*v >= '0' && *v <= '9' && end && *end == '\0' && n >= lo && n <= hi,
                  FR_ERR_INVALID_ARGUMENT,
                  std::string("cuda: ") + name + " must be a whole number from " + std::to_string(lo) +
                      " to " + std::to_string(hi) + ", found '" + v + "'");
  return static_cast<int>(n);
}
// What makes timed choices machine-specific: the device, its SM count and the CUDA, cuBLASLt and cuDNN
// versions (the first words of every tuning-cache key).
std::string machine_signature(int index, int sm_count) {
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, index);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::string name = prop.name;
  for (char& ch : name)
    if (ch == ' ' || ch == '\t') ch = '_';
  return name + "/sm" + std::to_string(prop.major) + std::to_string(prop.minor) + "x" +
         std::to_string(sm_count) + "/cuda" + std::to_string(runtime) + "/cublasLt" +
         std::to_string(cublasLtGetVersion()) + "/cudnn" + std::to_string(cudnnGetVersion());
}

bool env_switch(const char* name, bool fallback) {
  return env_int(name, fallback ? 1 : 0, 0, 1) != 0;
}

// The context's device made this thread's current one: the ranks of a data-parallel job (DeepLearningTask::
// ranks) drive their devices from threads of their own, and each run() from new ones; a thread's current
// device is what kernel launches, graph launches and copies without an explicit device go to. (One
// cudaSetDevice per call: a thread-local write when it is the current device already.)
void bind_device(void* p) {
  if (p) FR_CUDA_CHECK(cudaSetDevice(ctx_of(p)->device));
}

FrError* context_create(int32_t index, void** out) noexcept {
  return sdk::guard([&] {
    const int n = device_count();
    FR_PLUGIN_CHECK(n > 0, FR_ERR_DEVICE, "cuda: no CUDA device is visible (driver missing or no GPU)");
    FR_PLUGIN_CHECK(
        index >= 0 && index < n, FR_ERR_INVALID_ARGUMENT,
        "cuda: device " + std::to_string(index) + " does not exist (" + std::to_string(n) + " found)");
    FR_CUDA_CHECK(cudaSetDevice(index));
    auto c = std::make_unique<Context>();
    c->device = index;
    // Tuning from the environment (README "CUDA tuning"), before any handle exists.
    c->autotune = env_int("FRESCO_CUBLAS_AUTOTUNE", 2, 0, 2);
    c->log_choices = env_int("FRESCO_CUBLAS_LOG", 0, 0, 2);
    c->own_sgemm = env_int("FRESCO_CUDA_SGEMM", 0, 0, 2);
    c->conv_engines = env_int("FRESCO_CUDNN_ENGINES", 1, 0, 2);
    c->conv_engine_candidates = env_int("FRESCO_CUDNN_ENGINE_CANDIDATES", 64, 1, 1000);
    c->cudnn_wgrad_sms = env_int("FRESCO_CUDNN_WGRAD_SMS", -1, 0, 100000);
    c->narrow_conv = env_switch("FRESCO_CUDA_NARROW_CONV", true);
    c->conv_autotune = env_switch("FRESCO_CUDNN_AUTOTUNE", true);
    c->conv_deterministic = env_switch("FRESCO_CUDNN_DETERMINISTIC", true);
    // cuDNN's fused statistics add in an order that changes from run to run: only when non-deterministic
    // algorithms are admitted, unless asked for by name
    c->conv_genstats = env_int("FRESCO_CUDNN_GENSTATS", c->conv_deterministic ? 0 : 1, 0, 2);
    c->conv_log = env_int("FRESCO_CUDNN_LOG", 0, 0, 2);
    c->small_fc = env_switch("FRESCO_CUDA_SMALL_FC", true);
    c->fused_bias_grad = env_switch("FRESCO_CUBLAS_BGRAD", true);
    c->bn_recompute_mask = env_switch("FRESCO_CUDA_BN_RECOMPUTE_MASK", true);
    c->replace_memsets = env_switch("FRESCO_CUDA_GRAPH_MEMSETS", true);
    if (const char* dot = std::getenv("FRESCO_CUDA_GRAPH_DOT")) c->graph_dot = dot;
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS)
      throw sdk::KernelError(FR_ERR_DEVICE, "cuda: cublasLtCreate failed");
    try {  // a failure from here on (a bad environment value, the tuning cache) frees the handle too
      cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, index);
      int major = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index);
      c->dependent_launch = major >= 9 && device_code_has_dependent_launch() &&
                            env_switch("FRESCO_CUDA_DEPENDENT_LAUNCH", true);
      c->bn_dependent_launch = c->dependent_launch && env_switch("FRESCO_CUDA_BN_DEPENDENT_LAUNCH", true);
      c->bn_finalize_channels = env_int("FRESCO_CUDA_BN_FINALIZE_CHANNELS", 4, 4, 16);
      FR_PLUGIN_CHECK(c->bn_finalize_channels == 4 || c->bn_finalize_channels == 16, FR_ERR_INVALID_ARGUMENT,
                      "cuda: FRESCO_CUDA_BN_FINALIZE_CHANNELS must be 4 or 16");
      c->bn_resident = env_int("FRESCO_CUDA_BN_RESIDENT", 0, 0, 2);
      c->bn_resident_backward = env_int("FRESCO_CUDA_BN_RESIDENT_BACKWARD", 0, 0, 2);
      c->grad_finalize_channels = env_int("FRESCO_CUDA_GRAD_FINALIZE_CHANNELS", 16, 4, 16);
      FR_PLUGIN_CHECK(c->grad_finalize_channels == 4 || c->grad_finalize_channels == 16,
                      FR_ERR_INVALID_ARGUMENT, "cuda: FRESCO_CUDA_GRAD_FINALIZE_CHANNELS must be 4 or 16");
      const int grad_pdl = env_int("FRESCO_CUDA_BN_GRAD_DEPENDENT_LAUNCH", 1, 0, 2);
      c->bn_grad_dependent_launch = c->dependent_launch ? grad_pdl : 0;
      const bool memset_pdl = env_switch("FRESCO_CUDA_GRAPH_MEMSET_DEPENDENT", false);
      c->memset_dependent_launch = c->dependent_launch && memset_pdl;
      c->conv3x3_wgmma = conv3x3_wgmma_available(index) ? env_int("FRESCO_CUDA_WGMMA_CONV", 2, 0, 2) : 0;
      c->conv3x3_wgrad_sms = env_int("FRESCO_CUDA_WGMMA_WGRAD_SMS", 0, 0, 100000);
      int mem_khz = 0, bus_bits = 0;
      if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess &&
          cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index) == cudaSuccess)
        c->memory_gbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) / 1e9;
      else
        cudaGetLastError();  // attributes this driver does not report: cuDNN's weight gradients take every SM
      c->machine = machine_signature(index, c->sm_count);
      c->tuning = std::make_unique<TuningCache>(default_tuning_cache_path());
    } catch (...) {
      cublasLtDestroy(c->lt);
      throw;
    }
    *out = c.release();
  });
}

void context_destroy(void* p) noexcept {
  Context* c = ctx_of(p);
  if (!c) return;
  c->engine_plans.clear();  // backend plans before the cuDNN handle they were built on
  if (c->lt) cublasLtDestroy(c->lt);
  if (c->dnn) cudnnDestroy(c->dnn);
  delete c;
}

FrError* arena_alloc(void* p, uint64_t bytes, void** ptr) noexcept {
  return sdk::guard([&] {
    FR_CUDA_CHECK(cudaSetDevice(ctx_of(p)->device));
    void* d = nullptr;
    const cudaError_t e = cudaMalloc(&d, bytes ? bytes : 256);
    FR_PLUGIN_CHECK(e == cudaSuccess, FR_ERR_OUT_OF_MEMORY,
                    "cuda: cannot allocate " + std::to_string(bytes) +
                        " bytes of device memory: " + cudaGetErrorString(e));
    // cudaMemset on device memory is asynchronous on the legacy default stream, which does not order the
    // non-blocking streams every later copy and kernel run on: wait, or an early upload can be zeroed.
    cudaError_t z = cudaMemset(d, 0, bytes);
    if (z == cudaSuccess) z = cudaDeviceSynchronize();
    if (z != cudaSuccess) cudaFree(d);  // not kept on failure
    FR_CUDA_CHECK(z);
    ctx_of(p)->allocated += bytes;
    *ptr = d;
  });
}

void arena_free(void*, void* ptr) noexcept {
  cudaFree(ptr);
}

FrError* host_alloc(void*, uint64_t bytes, void** ptr) noexcept {
  return sdk::guard([&] {
    void* h = nullptr;
    FR_CUDA_CHECK(cudaHostAlloc(&h, bytes ? bytes : 256, cudaHostAllocDefault));
    *ptr = h;
  });
}

void host_free(void*, void* ptr) noexcept {
  cudaFreeHost(ptr);
}

FrError* stream_create(void* p, void** stream) noexcept {
  return sdk::guard([&] {
    FR_CUDA_CHECK(cudaSetDevice(ctx_of(p)->device));
    cudaStream_t s = nullptr;
    FR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
  });
}

void stream_destroy(void*, void* stream) noexcept {
  cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

FrError* stream_sync(void* p, void* stream) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    FR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
  });
}

FrError* memcpy_async(void* p, void* dst, const void* src, uint64_t bytes, int32_t kind,
                      void* stream) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    const cudaMemcpyKind k = kind == 0   ? cudaMemcpyHostToDevice
                             : kind == 1 ? cudaMemcpyDeviceToHost
                                         : cudaMemcpyDeviceToDevice;
    FR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)));
  });
}

FrError* capture_begin(void*, void* stream) noexcept {
  return sdk::guard([&] {
    FR_CUDA_CHECK(
        cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal));
  });
}

FrError* capture_end(void* p, void* stream, void** graph) noexcept {
  return sdk::guard([&] {
    cudaGraph_t g = nullptr;
    FR_CUDA_CHECK(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &g));
    std::unique_ptr<CUgraph_st, decltype(&cudaGraphDestroy)> owned(g, &cudaGraphDestroy);
    if (ctx_of(p)) FR_CUDA_CHECK(cudaSetDevice(ctx_of(p)->device));  // where the pass adds its kernel nodes
    if (!ctx_of(p) || ctx_of(p)->replace_memsets) {
      // The pass rewrites a copy: if it fails, the graph as captured is instantiated instead.
      cudaGraph_t copy = nullptr;
      FR_CUDA_CHECK(cudaGraphClone(&copy, g));
      std::unique_ptr<CUgraph_st, decltype(&cudaGraphDestroy)> rewritten(copy, &cudaGraphDestroy);
      try {
        replace_small_memsets(copy, ctx_of(p) && ctx_of(p)->memset_dependent_launch);
        owned.swap(rewritten);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[fresco-cuda] warning: memset nodes kept as captured: %s\n", e.what());
        (void)cudaGetLastError();
      }
    }
    if (ctx_of(p) && !ctx_of(p)->graph_dot.empty()) {
      const std::string path = ctx_of(p)->graph_dot + std::to_string(ctx_of(p)->graphs_captured++) + ".dot";
      // (a debugging aid: a file that cannot be written is reported, not fatal)
      if (cudaGraphDebugDotPrint(owned.get(), path.c_str(), cudaGraphDebugDotFlagsVerbose) != cudaSuccess) {
        std::fprintf(stderr, "[fresco-cuda] warning: FRESCO_CUDA_GRAPH_DOT: cannot write %s\n", path.c_str());
        (void)cudaGetLastError();
      }
    }
    cudaGraphExec_t exec = nullptr;
    FR_CUDA_CHECK(cudaGraphInstantiate(&exec, owned.get(), 0));
    *graph = exec;
  });
}

FrError* graph_launch(void* p, void* graph, void* stream) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    FR_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
  });
}

void graph_destroy(void*, void* graph) noexcept {
  cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

FrError* event_create(void* p, void** event) noexcept {
  return sdk::guard([&] {
    FR_CUDA_CHECK(cudaSetDevice(ctx_of(p)->device));
    cudaEvent_t e = nullptr;
    FR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    *event = e;
  });
}

void event_destroy(void*, void* event) noexcept {
  cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

FrError* event_record(void* p, void* event, void* stream) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    FR_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  });
}

FrError* stream_wait_event(void* p, void* stream, void* event) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    FR_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
  });
}

FrError* event_sync(void* p, void* event) noexcept {
  return sdk::guard([&] {
    bind_device(p);
    FR_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  });
}

uint64_t memory_in_use(void* p) noexcept {
  return p ? ctx_of(p)->allocated : 0;
}
}  // namespace

extern const FrDeviceApi kCudaDevice = {.struct_size = sizeof(FrDeviceApi),
                                        .pad_ = 0,
                                        .name = "cuda",
                                        .device_count = device_count,
                                        .context_create = context_create,
                                        .context_destroy = context_destroy,
                                        .arena_alloc = arena_alloc,
                                        .arena_free = arena_free,
                                        .host_alloc = host_alloc,
                                        .host_free = host_free,
                                        .stream_create = stream_create,
                                        .stream_destroy = stream_destroy,
                                        .stream_sync = stream_sync,
                                        .memcpy_async = memcpy_async,
                                        .capture_begin = capture_begin,
                                        .capture_end = capture_end,
                                        .graph_launch = graph_launch,
                                        .graph_destroy = graph_destroy,
                                        .event_create = event_create,
                                        .event_destroy = event_destroy,
                                        .event_record = event_record,
                                        .stream_wait_event = stream_wait_event,
                                        .event_sync = event_sync,
                                        .memory_in_use = memory_in_use,
                                        .ext = nullptr};

}  // namespace fresco::cuda
