// CPU range op adam_update over a whole region range: PyTorch Adam (L2 decay into g) or AdamW (decoupled
// decay), bias correction with t = updates + 1: w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps); beta1 the step's
// entry of a per-step table when the node has one (ops.h). With the weight copy (ops.h,
// FR_KERNEL_WEIGHT_COPY) also writes w rounded to the copy's 16-bit type, skipped step or not. g may be f16
// or bf16, unscaled as read (ops.h, FR_KERNEL_HALF_GRADS). With backups (ops.h, FR_KERNEL_UPDATE_BACKUPS)
// w, m and v are first copied into them. Tests: test_optimizers.cpp, test_grads16.cpp.
#include "cpu_common.h"
#include "fresco/update_rules.h"
#include "ops/float_convert.h"
#include "ops/step_momentum.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(adam_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 3, "adam_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "adam_update: step scalars range too small");
    FrAdamParams p = sdk::params<FrAdamParams>(call);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    const uint64_t n = sdk::count<float>(call->rout[0]);
    const FrRange& gr = sdk::update_grads(call, n, "adam_update");
    FR_PLUGIN_CHECK(sdk::count<float>(call->rout[1]) == n && sdk::count<float>(call->rout[2]) == n,
                    FR_ERR_INVALID_ARGUMENT, "adam_update: w/m/v ranges differ in size");
    void* backup[3];
    const uint32_t tail = sdk::update_backups(call, p.backups, 3, backup, "adam_update");
    const FrRange* copy = sdk::weight_copy(call, 3, n, "adam_update", tail);
    keep_backups(call, backup, 3);
    float* w = sdk::data<float>(call->rout[0]);
    if (s->skip_step) {
      if (copy) write_weight_copy(w, *copy, static_cast<int64_t>(n));
      return;
    }
    if (call->n_rin >= 3) p.beta1 = step_momentum(call->rin[2], s->step, "adam_update");
    float* m = sdk::data<float>(call->rout[1]);
    float* v = sdk::data<float>(call->rout[2]);
    const FrAdamStepConsts k = fr_adam_consts(&p, s->lr, s->updates);
    with_update_grads(gr, s->loss_scale, [&](auto g) {
      parallel_chunks(static_cast<int64_t>(n), 1 << 14, [&](int64_t a, int64_t b) {
        float* __restrict wr = w;
        float* __restrict mr = m;
        float* __restrict vr = v;
        const FrAdamParams pp = p;  // a local copy: no aliasing with the arrays, so the loop vectorises
        for (int64_t i = a; i < b; ++i) {
          float wi = wr[i], mi = mr[i], vi = vr[i];
          fr_adam_step(&wi, &mi, &vi, g(i), &pp, k);
          wr[i] = wi, mr[i] = mi, vr[i] = vi;
        }
        if (copy)
          for (int64_t i = a; i < b; ++i) store_float(copy->data, copy->dtype, i, wr[i]);
      });
    });
  });
}

}  // namespace fresco::cpu
