// CPU range op adam_update over a whole region range: PyTorch Adam (L2 decay into g) or AdamW (decoupled
// decay), bias correction with t = step + 1: w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps). Test:
// test_optimizers.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(adam_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 3, "adam_update");
    const auto& p = sdk::params<FrAdamParams>(call);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    if (s->skip_step) return;
    const uint64_t n = sdk::count<float>(call->rout[0]);
    FR_PLUGIN_CHECK(sdk::count<float>(call->rin[0]) == n && sdk::count<float>(call->rout[1]) == n &&
                        sdk::count<float>(call->rout[2]) == n,
                    FR_ERR_INVALID_ARGUMENT, "adam_update: w/g/m/v ranges differ in size");
    float* w = sdk::data<float>(call->rout[0]);
    float* m = sdk::data<float>(call->rout[1]);
    float* v = sdk::data<float>(call->rout[2]);
    const float* g = sdk::data<float>(call->rin[0]);
    const double t = static_cast<double>(s->step) + 1.0;
    const float lr = s->lr;
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(p.beta1), t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(p.beta2), t)));
    const float b1 = p.beta1, b2 = p.beta2, eps = p.eps, wd = p.weight_decay;
    const bool decoupled = p.decoupled != 0;
    parallel_chunks(static_cast<int64_t>(n), 1 << 14, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {
        float gi = g[i];
        if (decoupled)
          w[i] *= 1.0f - lr * wd;
        else
          gi += wd * w[i];
        m[i] += (1.0f - b1) * (gi - m[i]);  // PyTorch: exp_avg.lerp_(grad, 1 - beta1)
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        w[i] -= step_size * (m[i] / denom);
      }
    });
  });
}

}  // namespace fresco::cpu
