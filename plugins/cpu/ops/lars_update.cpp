// CPU range op lars_update over one parameter tensor (ops.h): the tensor's norms ||w|| and ||g + wd w||,
// added in double over fixed chunks in order (the same sums on any thread count), give the trust ratio q;
// then buf = momentum buf + q (g + wd w) and w -= lr buf per element. The momentum of the step from the
// optional per-step table; the partial sums in the workspace (no allocation a step). Skips the update when
// skip_step is set. Test: test_optimizers.cpp.
#include <cmath>

#include "cpu_common.h"
#include "fresco/lars_checks.hpp"
#include "fresco/update_rules.h"
#include "ops/step_momentum.h"

namespace fresco::cpu {

namespace {
constexpr int64_t kChunk = 1 << 14;  // the norms' partial sums: one per chunk, added in order
int64_t chunks_of(uint64_t n) {
  return (static_cast<int64_t>(n) + kChunk - 1) / kChunk;
}
}  // namespace

// The workspace holds the chunks' partial sums (two doubles a chunk), so a step allocates nothing.
FR_CPU_KERNEL_PREPARE(lars_update) {
  return sdk::guard([&] {
    uint64_t n = 0;
    sdk::lars_checked(call, &n);
    *state = nullptr;
    *workspace_bytes = static_cast<uint64_t>(chunks_of(n)) * 2 * sizeof(double);
  });
}

FR_CPU_KERNEL_RUN(lars_update) {
  return sdk::guard([&] {
    uint64_t n = 0;
    const FrLarsParams& p = sdk::lars_checked(call, &n);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    if (s->skip_step) return;
    float* w = sdk::data<float>(call->rout[0]);
    float* buf = sdk::data<float>(call->rout[1]);
    const float* g = sdk::data<float>(call->rin[0]);
    const float lr = s->lr, wd = p.weight_decay;
    const float mom = call->n_rin >= 3 ? step_momentum(call->rin[2], s->step, "lars_update") : p.momentum;
    const int64_t len = static_cast<int64_t>(n), chunks = chunks_of(n);
    FR_PLUGIN_CHECK(
        call->workspace && call->workspace_bytes >= static_cast<uint64_t>(chunks) * 2 * sizeof(double),
        FR_ERR_INVALID_ARGUMENT, "lars_update: run without the workspace asked by prepare");
    double* ww = static_cast<double*>(call->workspace);
    double* dd = ww + chunks;
    parallel_chunks(len, kChunk, [&](int64_t a, int64_t b) {
      double sw = 0.0, sd = 0.0;
      for (int64_t i = a; i < b; ++i) {
        const double d = static_cast<double>(g[i] + wd * w[i]);
        sw += static_cast<double>(w[i]) * w[i];
        sd += d * d;
      }
      ww[a / kChunk] = sw, dd[a / kChunk] = sd;
    });
    double sw = 0.0, sd = 0.0;
    for (int64_t c = 0; c < chunks; ++c) sw += ww[c], sd += dd[c];
    const float q = fr_lars_trust(std::sqrt(sw), std::sqrt(sd), p.eta);
    parallel_chunks(len, kChunk, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) fr_lars_step(w + i, buf + i, g[i], lr, wd, mom, q);
    });
  });
}

}  // namespace fresco::cpu
