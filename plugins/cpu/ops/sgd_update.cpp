// CPU range op sgd_update over a whole region range, PyTorch SGD: g += wd*w; buf = momentum*buf + g;
// g = nesterov ? g + momentum*buf : buf; w -= lr*g, the momentum the step's entry of a per-step table when
// the node has one (ops.h). Skips the update when skip_step is set. With the weight copy (ops.h,
// FR_KERNEL_WEIGHT_COPY) also writes w rounded to the copy's 16-bit type, skipped step or not. g may be f16
// or bf16, unscaled as read (ops.h, FR_KERNEL_HALF_GRADS). With backups (ops.h, FR_KERNEL_UPDATE_BACKUPS)
// w and the buffer are first copied into them. Tests: test_optimizers.cpp, test_grads16.cpp.
#include "cpu_common.h"
#include "fresco/update_rules.h"
#include "ops/float_convert.h"
#include "ops/step_momentum.h"

namespace fresco::cpu {

FR_CPU_KERNEL_RUN(sgd_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 1, "sgd_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "sgd_update: step scalars range too small");
    const auto& p = sdk::params<FrSgdParams>(call);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    const uint64_t n = sdk::count<float>(call->rout[0]);
    const FrRange& gr = sdk::update_grads(call, n, "sgd_update");
    const bool has_buf = p.momentum != 0.0f;
    FR_PLUGIN_CHECK(!has_buf || (call->n_rout >= 2 && sdk::count<float>(call->rout[1]) == n),
                    FR_ERR_INVALID_ARGUMENT, "sgd_update: momentum buffer missing or of another size");
    const uint32_t kept = has_buf ? 2 : 1;  // the f32 ranges it writes
    void* backup[2];
    const uint32_t tail = sdk::update_backups(call, p.backups, kept, backup, "sgd_update");
    const FrRange* copy = sdk::weight_copy(call, kept, n, "sgd_update", tail);
    keep_backups(call, backup, kept);
    float* w = sdk::data<float>(call->rout[0]);
    if (s->skip_step) {
      if (copy) write_weight_copy(w, *copy, static_cast<int64_t>(n));
      return;
    }
    float* buf = has_buf ? sdk::data<float>(call->rout[1]) : nullptr;
    const float lr = s->lr, wd = p.weight_decay;
    const float mom = call->n_rin >= 3 ? step_momentum(call->rin[2], s->step, "sgd_update") : p.momentum;
    const int nesterov = p.nesterov;
    with_update_grads(gr, s->loss_scale, [&](auto g) {
      parallel_chunks(static_cast<int64_t>(n), 1 << 14, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          fr_sgd_step(w + i, buf ? buf + i : nullptr, g(i), lr, wd, mom, nesterov);
          if (copy) store_float(copy->data, copy->dtype, i, w[i]);
        }
      });
    });
  });
}

}  // namespace fresco::cpu
