// Algorithm search for the fp32 matmuls (ops/matmul_plan.cu), run at prepare time, before capture.
// Candidates are the heuristic's list plus, at search level 2, every configuration cuBLASLt accepts for the
// problem (each algorithm id's tiles, split-K counts and reduction schemes, checked with
// cublasLtMatmulAlgoCheck), and the own kernel's configurations (ops/sgemm.h). Each candidate is timed the
// way it will run: several back-to-back calls captured in one CUDA graph and replayed. Every reduction scheme
// of cuBLASLt's split-K is deterministic (in-place with ordering counters, or a separate reduction pass), and
// the own kernel's split-K adds its partials in a fixed order, so any choice keeps results bit-reproducible.
#pragma once

#include <vector>

#include "ops/matmul_plan.h"

namespace fresco::cuda {

// Every configuration of every fp32 algorithm id that cublasLtMatmulAlgoCheck accepts for p's problem within
// max_workspace, at most `limit` of them (deterministic order: algorithm id, tile, stages, split-K, scheme).
std::vector<MatmulChoice> enumerate_matmul_configs(Context* ctx, const MatmulPlan& p, uint64_t max_workspace,
                                                   size_t limit);

// Index of the candidate to use: by graph-replayed time per call, among those within 0.5% of the fastest the
// one with the fewest split-K slices, then the fastest, then the first (the caller keeps the choice in the
// tuning cache, so it does not swap between runs). *us (when given) receives
// each candidate's time per call, negative for one that could not run.
int fastest_matmul(Context* ctx, const MatmulPlan& p, const std::vector<MatmulChoice>& cands, int64_t m,
                   int64_t n, int64_t k, std::vector<float>* us);

}  // namespace fresco::cuda
