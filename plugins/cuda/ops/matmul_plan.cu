// cuBLASLt plan/run for the fc kernels (see matmul_plan.h for the layout algebra).
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "ops/matmul_plan.h"
#include "ops/matmul_search.h"

namespace fresco::cuda {

namespace {
constexpr double kSearchMinFma = 1 << 22;  // smaller problems keep the heuristic's choice
constexpr size_t kSearchLimit = 240;       // enumerated configurations timed per problem, at most

// "cuBLASLt algo A tile T split S scheme R" for the search log.
std::string algo_name(const cublasLtMatmulAlgo_t& a) {
  int32_t id = -1, split = 1;
  uint32_t tile = 0, scheme = 0;
  size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split, sizeof split, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme, &w);
  return "cuBLASLt algo " + std::to_string(id) + " tile " + std::to_string(tile) + " split " +
         std::to_string(split) + " scheme " + std::to_string(scheme);
}

// The description a tuning-cache entry is checked against.
std::string candidate_name(const MatmulChoice& c) {
  return (c.own.tile >= 0 ? sgemm_name(c.own) : algo_name(c.algo)) + " ws " + std::to_string(c.workspace);
}
}  // namespace

void plan_matmul(Context* ctx, MatmulPlan& p, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 bool bias, bool relu, uint64_t max_workspace, bool bias_grad) {
  FR_PLUGIN_CHECK(!bias_grad || (!bias && !relu), FR_ERR_INVALID_ARGUMENT,
                  "matmul: a bias gradient epilogue takes no bias or relu");
  FR_PLUGIN_CHECK(
      !bias_grad || ctx->own_sgemm != 2, FR_ERR_UNSUPPORTED,
      "matmul: FRESCO_CUDA_SGEMM=2 asks for the own kernel only, which has no bias-gradient epilogue");
  // Column-major view: C^T[n,m] = op(B)^T[n,k] op(A)^T[k,m]. Row-major B stored [k,n] is column-major [n,k] =
  // B^T, so the first operand is B with transa = trans_b; likewise the second is A with transb = trans_a.
  FR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  FR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  FR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  p.bias = bias;
  p.bias_grad = bias_grad;
  if (bias || relu || bias_grad) {
    // In the column-major view op(A) is the second operand: its sums over k are BGRADB's.
    const cublasLtEpilogue_t epi = bias_grad      ? CUBLASLT_EPILOGUE_BGRADB
                                   : bias && relu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                   : bias         ? CUBLASLT_EPILOGUE_BIAS
                                                  : CUBLASLT_EPILOGUE_RELU;
    FR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  }
  // Stored shapes (column-major rows x cols, leading dimension = rows).
  const uint64_t b_rows = trans_b ? k : n, b_cols = trans_b ? n : k;  // B stored row-major [n,k] or [k,n]
  const uint64_t a_rows = trans_a ? m : k, a_cols = trans_a ? k : m;
  FR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, b_rows, b_cols, static_cast<int64_t>(b_rows)));
  FR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, a_rows, a_cols, static_cast<int64_t>(a_rows)));
  FR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, n, m, n));
  p.problem = SgemmProblem{trans_a, trans_b, m, n, k, bias, relu};
  // One choice per problem per context: a shape seen before takes it without asking the heuristic again.
  const std::string key = std::to_string(trans_a) + std::to_string(trans_b) + "," + std::to_string(m) + "," +
                          std::to_string(n) + "," + std::to_string(k) + "," +
                          std::to_string(bias_grad ? 2 : static_cast<int>(bias)) + std::to_string(relu);
  auto cached = ctx->algo_cache.find(key);
  if (cached != ctx->algo_cache.end()) {
    p.algo = cached->second.algo;
    p.workspace = cached->second.workspace;
    p.own = cached->second.own;
    return;
  }
  // The own kernel's configurations (FRESCO_CUDA_SGEMM=1: beside cuBLASLt's, 2: instead of them).
  std::vector<MatmulChoice> own;
  if (ctx->own_sgemm >= 1 && !bias_grad)  // the own kernel has no bias-gradient epilogue
    for (const SgemmConfig c : sgemm_configs(p.problem, ctx->sm_count, max_workspace))
      own.push_back({cublasLtMatmulAlgo_t{}, sgemm_workspace(p.problem, c), c});
  const bool only_own = ctx->own_sgemm == 2 && !own.empty();
  cublasLtMatmulPreference_t pref = nullptr;
  FR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace);
  if (set != CUBLAS_STATUS_SUCCESS) cublasLtMatmulPreferenceDestroy(pref);  // not kept on failure
  FR_CUBLAS_CHECK(set);
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(ctx->lt, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  FR_PLUGIN_CHECK(only_own || (st == CUBLAS_STATUS_SUCCESS && found > 0), FR_ERR_UNSUPPORTED,
                  "cuBLASLt has no fp32 algorithm for " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + (bias_grad ? " with a bias gradient" : "") + " (status " +
                      std::to_string(st) + ")");
  {
    std::vector<MatmulChoice> cands;
    if (!only_own)
      for (int i = 0; i < found; ++i) cands.push_back({results[i].algo, results[i].workspaceSize, {}});
    // Problems this small run in a few microseconds whatever the configuration: not worth the search (unless
    // only the own kernel is asked for: then its configurations are always timed).
    const bool worth = static_cast<double>(m) * n * k >= kSearchMinFma || only_own;
    if (ctx->autotune >= 2 && worth && !only_own) {
      const auto more = enumerate_matmul_configs(ctx, p, max_workspace, kSearchLimit);
      cands.insert(cands.end(), more.begin(), more.end());
    }
    // The own configurations join only a search that times candidates (never untimed).
    const bool timed = (ctx->autotune >= 1 || only_own) && worth;
    const size_t first_own = cands.size();
    if (timed) cands.insert(cands.end(), own.begin(), own.end());
    int pick = 0;
    std::vector<float> us;
    bool from_cache = false;
    if (timed && cands.size() > 1) {
      // The settings that shape the candidate list are part of the key (tuning/tuning_cache.h).
      const std::string tkey = "matmul " + ctx->machine + " " + key + " autotune " +
                               std::to_string(ctx->autotune) + " own " + std::to_string(ctx->own_sgemm) +
                               " ws " + std::to_string(max_workspace) + " ties splits";
      // A hit must name the candidate at its index and carry the timed pick's time (else: time again).
      const std::optional<TunedChoice> hit = ctx->tuning ? ctx->tuning->find(tkey) : std::nullopt;
      if (hit && hit->index < static_cast<int>(cands.size()) && hit->ms.size() == cands.size() &&
          std::isfinite(hit->ms[static_cast<size_t>(hit->index)]) &&
          hit->ms[static_cast<size_t>(hit->index)] > 0 &&
          hit->name == candidate_name(cands[static_cast<size_t>(hit->index)])) {
        pick = hit->index;
        us = hit->ms;
        from_cache = true;
      } else {
        pick = fastest_matmul(ctx, p, cands, m, n, k, &us);
        const bool measured = static_cast<size_t>(pick) < us.size() && us[static_cast<size_t>(pick)] > 0.0f;
        if (ctx->tuning && measured)  // a pick no candidate's timing supports is not recorded
          ctx->tuning->put(tkey, {pick, candidate_name(cands[static_cast<size_t>(pick)]), us});
      }
    }
    if (ctx->log_choices) {
      float lt_best = -1.0f, own_best = -1.0f;
      for (size_t i = 0; i < us.size(); ++i) {
        float& best = i < first_own ? lt_best : own_best;
        if (us[i] > 0.0f && (best < 0.0f || us[i] < best)) best = us[i];
      }
      const MatmulChoice& c = cands[static_cast<size_t>(pick)];
      std::fprintf(stderr,
                   "[fresco-cuda] matmul %s: %zu cuBLASLt + %zu own candidates, %s %.2f us, "
                   "best cuBLASLt %.2f us, best own %.2f us, chosen #%d (%s) %.2f us%s\n",
                   key.c_str(), first_own, cands.size() - first_own,
                   first_own ? "heuristic's first" : "first own", us.empty() ? -1.0f : us[0], lt_best,
                   own_best, pick, c.own.tile >= 0 ? sgemm_name(c.own).c_str() : algo_name(c.algo).c_str(),
                   static_cast<size_t>(pick) < us.size() ? us[static_cast<size_t>(pick)] : -1.0f,
                   from_cache ? " (tuning cache)" : "");
      if (ctx->log_choices >= 2)
        for (size_t i = 0; i < us.size() && i < cands.size(); ++i)
          std::fprintf(stderr, "[fresco-cuda]   candidate %s #%zu\t%s\t%.2f us\n", key.c_str(), i,
                       candidate_name(cands[i]).c_str(), us[i]);
    }
    // A bias-gradient configuration must have run here (its caller falls back to a separate sum when not):
    // one that was not timed (a small problem, FRESCO_CUBLAS_AUTOTUNE=0) or whose timing failed runs once.
    if (bias_grad) {
      const bool ran = static_cast<size_t>(pick) < us.size() &&
                       std::isfinite(us[static_cast<size_t>(pick)]) && us[static_cast<size_t>(pick)] > 0.0f;
      std::vector<float> once;
      if (!ran) fastest_matmul(ctx, p, {cands[static_cast<size_t>(pick)]}, m, n, k, &once);
      FR_PLUGIN_CHECK(ran || (!once.empty() && std::isfinite(once[0]) && once[0] > 0.0f), FR_ERR_UNSUPPORTED,
                      "cuBLASLt's bias-gradient configuration for " + std::to_string(m) + "x" +
                          std::to_string(n) + "x" + std::to_string(k) + " did not run");
    }
    p.algo = cands[pick].algo;
    p.workspace = cands[pick].workspace;
    p.own = cands[pick].own;
    ctx->algo_cache.emplace(key, cands[pick]);
  }
}

void run_matmul(Context* ctx, const MatmulPlan& p, const float* a, const float* b, float* c,
                const float* bias, void* workspace, uint64_t workspace_bytes, cudaStream_t s) {
  FR_PLUGIN_CHECK(workspace_bytes >= p.workspace, FR_ERR_INVALID_ARGUMENT, "matmul: workspace too small");
  if (p.own.tile >= 0) return sgemm_run(p.problem, p.own, a, b, c, bias, workspace, workspace_bytes, s);
  if (p.bias || p.bias_grad)  // the bias read, or the bias gradient written
    FR_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const float one = 1.0f, zero = 0.0f;
  FR_CUBLAS_CHECK(cublasLtMatmul(ctx->lt, p.desc, &one, b, p.a, a, p.b, &zero, c, p.c, c, p.c, &p.algo,
                                 workspace, p.workspace, s));
}

void destroy_matmul(MatmulPlan& p) {
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  p = MatmulPlan{};
}

}  // namespace fresco::cuda
