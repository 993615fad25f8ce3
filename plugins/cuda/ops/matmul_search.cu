// cuBLASLt configuration enumeration and graph-replayed timing (see matmul_search.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/matmul_search.h"
#include "ops/scratch_fill.h"
#include "tuning/tied_choice.h"

namespace fresco::cuda {

namespace {
constexpr int kRepsPerGraph = 8;  // back-to-back calls per captured graph: hides the graph launch itself
constexpr int kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
// Candidates within this fraction of the fastest time count as tied: timing them again moves their order.
constexpr float kTie = 0.005f;

// The split-K slices of a configuration (1 without split-K).
int splits_of(const MatmulChoice& c) {
  if (c.own.tile >= 0) return c.own.splits;
  int32_t split = 1;
  size_t w = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split,
                                           &w) != CUBLAS_STATUS_SUCCESS)
    return 1;
  return split > 0 ? split : 1;
}

// Scratch operands and timing objects for one search, freed on every path.
struct Scratch {
  float *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void* w = nullptr;
  uint64_t ws = 0;
  cudaStream_t s = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  Scratch(int64_t m, int64_t n, int64_t k, uint64_t workspace) : ws(workspace) {
    try {  // a failed allocation frees the earlier ones (the destructor does not run)
      FR_CUDA_CHECK(cudaMalloc(&a, sizeof(float) * m * k));
      FR_CUDA_CHECK(cudaMalloc(&b, sizeof(float) * k * n));
      FR_CUDA_CHECK(cudaMalloc(&c, sizeof(float) * m * n));
      FR_CUDA_CHECK(cudaMalloc(&bias, sizeof(float) * std::max(m, n)));  // a bias gradient has m values
      if (ws) FR_CUDA_CHECK(cudaMalloc(&w, ws));
      FR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      FR_CUDA_CHECK(cudaEventCreate(&e0));
      FR_CUDA_CHECK(cudaEventCreate(&e1));
      fill_scratch(FR_F32, a, m * k, 0.5f, s);  // deterministic, not zero
      fill_scratch(FR_F32, b, k * n, 0.5f, s);
      fill_scratch(FR_F32, bias, std::max(m, n), 0.5f, s);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Scratch() { release(); }
  void release() noexcept {
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(bias), cudaFree(w);
    if (s) cudaStreamDestroy(s);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    a = b = c = bias = nullptr, w = nullptr, s = nullptr, e0 = e1 = nullptr;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// Microseconds per call of one candidate: kRepsPerGraph calls captured in one graph, best of three replays
// after a warm-up. Negative when the candidate cannot be captured or run here.
float time_candidate(Context* ctx, const MatmulPlan& p, const MatmulChoice& cand, Scratch& x) {
  MatmulPlan trial = p;
  trial.algo = cand.algo;
  trial.workspace = cand.workspace;
  trial.own = cand.own;
  FR_CUDA_CHECK(cudaStreamBeginCapture(x.s, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  try {
    for (int r = 0; r < kRepsPerGraph; ++r) run_matmul(ctx, trial, x.a, x.b, x.c, x.bias, x.w, x.ws, x.s);
  } catch (const sdk::KernelError&) {
    ok = false;  // a configuration the library refuses at run time is skipped
  }
  cudaGraph_t g = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(x.s, &g);
  cudaGraphExec_t exec = nullptr;
  if (ok && ended == cudaSuccess && g)
    ok = cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  else
    ok = false;
  float best = std::numeric_limits<float>::infinity();
  for (int r = 0; r < 4 && ok; ++r) {
    ok = cudaEventRecord(x.e0, x.s) == cudaSuccess && cudaGraphLaunch(exec, x.s) == cudaSuccess &&
         cudaEventRecord(x.e1, x.s) == cudaSuccess && cudaEventSynchronize(x.e1) == cudaSuccess;
    float ms = 0.0f;
    if (ok && r > 0 && cudaEventElapsedTime(&ms, x.e0, x.e1) == cudaSuccess) best = std::min(best, ms);
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  if (!ok) {
    (void)cudaGetLastError();  // clear a refusal so later calls do not report it
    return -1.0f;
  }
  return best * 1000.0f / kRepsPerGraph;
}

template <typename T>
std::vector<T> cap_array(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr,
                         T fallback) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0)
    return {fallback};
  std::vector<T> v(bytes / sizeof(T));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
    return {fallback};
  return v;
}

template <typename T>
T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}
}  // namespace

std::vector<MatmulChoice> enumerate_matmul_configs(Context* ctx, const MatmulPlan& p, uint64_t max_workspace,
                                                   size_t limit) {
  int ids[256];
  int n_ids = 0;
  if (cublasLtMatmulAlgoGetIds(ctx->lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               CUDA_R_32F, 256, ids, &n_ids) != CUBLAS_STATUS_SUCCESS)
    return {};
  struct Scored {
    MatmulChoice cand;
    float efficiency;  // fraction of the last wave of thread blocks that is busy: 1 = no partial wave
  };
  std::vector<Scored> found;
  for (int i = 0; i < n_ids; ++i) {
    cublasLtMatmulAlgo_t algo{};
    if (cublasLtMatmulAlgoInit(ctx->lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                               CUDA_R_32F, ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    const auto tiles = cap_array<uint32_t>(algo, CUBLASLT_ALGO_CAP_TILE_IDS, CUBLASLT_MATMUL_TILE_UNDEFINED);
    const bool splitk = cap_value<int32_t>(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t schemes = cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    for (uint32_t tile : tiles) {
      for (int split : kSplits) {
        if (split > 1 && !splitk) break;
        for (uint32_t scheme : {0u, 1u, 2u}) {  // none, in place, compute type (fp32 output = compute type)
          if ((split == 1) != (scheme == 0) || (scheme && !(schemes & scheme))) continue;
          cublasLtMatmulAlgo_t a = algo;
          const int32_t sk = split;
          if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile) ||
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk) ||
              cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                   sizeof scheme))
            continue;
          cublasLtMatmulHeuristicResult_t r{};
          if (cublasLtMatmulAlgoCheck(ctx->lt, p.desc, p.a, p.b, p.c, p.c, &a, &r) != CUBLAS_STATUS_SUCCESS ||
              r.workspaceSize > max_workspace)
            continue;
          const float waves = r.wavesCount > 0.0f ? r.wavesCount : 1.0f;
          found.push_back({{a, r.workspaceSize}, waves / std::ceil(waves)});
        }
      }
    }
  }
  // Keep the configurations that use the machine best when there are more than `limit`.
  std::stable_sort(found.begin(), found.end(),
                   [](const Scored& x, const Scored& y) { return x.efficiency > y.efficiency; });
  std::vector<MatmulChoice> out;
  for (size_t i = 0; i < found.size() && out.size() < limit; ++i) out.push_back(found[i].cand);
  return out;
}

int fastest_matmul(Context* ctx, const MatmulPlan& p, const std::vector<MatmulChoice>& cands, int64_t m,
                   int64_t n, int64_t k, std::vector<float>* us) {
  uint64_t ws = 0;
  for (const auto& c : cands) ws = std::max(ws, c.workspace);
  Scratch x(m, n, k, ws);
  std::vector<float> t(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) t[i] = time_candidate(ctx, p, cands[i], x);
  // Among the candidates within kTie of the fastest, the one with the fewest split-K slices, then the
  // fastest, then the first (tuning/tied_choice.h). Inside a training step GEMMs run beside each other, and
  // there a split-K configuration (more blocks, a reduction through the workspace) costs more than alone: on
  // the H200 the MLP's fc0 weight gradient took a split-4 configuration 0.2% faster alone than the unsplit
  // one, and the step ran at 0.2897 ms against 0.2642 (docs/performance.md). Later runs on this machine take
  // the same choice from the tuning cache (tuning/tuning_cache.h), so timing noise cannot swap it between
  // runs.
  std::vector<int> splits(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) splits[i] = splits_of(cands[i]);
  const int pick = std::max(tied_choice(t, splits, kTie), 0);
  if (us) *us = t;
  return pick;
}

}  // namespace fresco::cuda
