// CPU range op lars_update over one parameter tensor (ops.h): the tensor's norms ||w|| and ||g + wd w||,
// added in double over fixed chunks in order (the same sums on any thread count), give the trust ratio q;
// then buf = momentum buf + q (g + wd w) and w -= lr buf per element. The momentum of the step from the
// optional per-step table. Skips the update when skip_step is set. Test: test_optimizers.cpp.
#include <cmath>
#include <vector>

#include "cpu_common.h"
#include "fresco/lars_checks.hpp"
#include "fresco/update_rules.h"
#include "ops/step_momentum.h"

namespace fresco::cpu {

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
    constexpr int64_t kChunk = 1 << 14;
    const int64_t len = static_cast<int64_t>(n), chunks = (len + kChunk - 1) / kChunk;
    std::vector<double> ww(static_cast<size_t>(chunks)), dd(static_cast<size_t>(chunks));
    parallel_chunks(len, kChunk, [&](int64_t a, int64_t b) {
      double sw = 0.0, sd = 0.0;
      for (int64_t i = a; i < b; ++i) {
        const double d = static_cast<double>(g[i] + wd * w[i]);
        sw += static_cast<double>(w[i]) * w[i];
        sd += d * d;
      }
      ww[static_cast<size_t>(a / kChunk)] = sw, dd[static_cast<size_t>(a / kChunk)] = sd;
    });
    double sw = 0.0, sd = 0.0;
    for (int64_t c = 0; c < chunks; ++c) sw += ww[static_cast<size_t>(c)], sd += dd[static_cast<size_t>(c)];
    const float q = fr_lars_trust(std::sqrt(sw), std::sqrt(sd), p.eta);
    parallel_chunks(len, kChunk, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) fr_lars_step(w + i, buf + i, g[i], lr, wd, mom, q);
    });
  });
}

}  // namespace fresco::cpu
