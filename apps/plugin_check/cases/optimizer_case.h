// An optimizer update's reference case for fresco-plugin-check (step_cases.cpp, variant_cases.cpp):
// sgd_update (Nesterov, weight decay 5e-4) or adam_update (AdamW, weight decay 1e-2) over n weights, checked
// against reference/optimizers.h. The caller gives the kernel's gradient range and any optional form's flags.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cases/case_helpers.h"
#include "reference/optimizers.h"

namespace fresco::check {

// Fills c's weights (and buffers), params and error for `op` (sgd_update or adam_update) at step scalars s:
// the kernel reads rin {grads, s[, table]} as the caller sets them, the reference takes the gradients as `g`
// and the momentum (Adam: beta1) `ref_momentum`; `param_momentum` is what the params carry (a momentum
// table's case gives the kernel its table and the reference the table's entry). With `backups` (ops.h,
// FR_KERNEL_UPDATE_BACKUPS) the f32 ranges are followed by backups (poisoned) that must hold their values
// from before the step.
inline void optimizer_case(const std::string& op, std::mt19937& rng, const std::vector<double>& g,
                           const FrStepScalars& s, float param_momentum, double ref_momentum, OpCase* c,
                           bool backups = false) {
  const size_t n = g.size();
  const int64_t len = static_cast<int64_t>(n);
  const auto w = random(rng, n), m = random(rng, n), v = random(rng, n, 0.01f, 1.0f);
  const bool sgd = op == FR_OP_SGD_UPDATE;
  const std::vector<std::vector<float>> before = sgd ? std::vector{w, m} : std::vector{w, m, v};
  for (const auto& r : before) c->rout.push_back(f32(r, {1, 1, 1, len}));
  if (backups)
    for (size_t k = 0; k < before.size(); ++k)
      c->rout.push_back(f32(std::vector<float>(n, NAN), {1, 1, 1, len}));
  c->params = sgd ? params_of(FrSgdParams{param_momentum, 5e-4f, 1, backups ? 1 : 0})
                  : params_of(FrAdamParams{param_momentum, 0.999f, 1e-8f, 1e-2f, 1, backups ? 1 : 0});
  auto kept = [=](const auto& rout) {  // the backups against the values before the step
    double e = 0.0;
    if (backups)
      for (size_t k = 0; k < before.size(); ++k)
        e = std::max(e, rel_err(floats(rout[before.size() + k]), widen(before[k])));
    return e;
  };
  if (sgd) {
    c->error = [=](const auto&, const auto& rout) {
      ref::SgdState st{widen(w), widen(m), true};
      ref::sgd_step(st, g, s.lr, ref::SgdConfig{ref_momentum, 5e-4, true});
      return std::max({rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.buf), kept(rout)});
    };
    return;
  }
  c->error = [=](const auto&, const auto& rout) {
    ref::AdamState st{widen(w), widen(m), widen(v), s.step};
    ref::adam_step(st, g, s.lr, ref::AdamConfig{ref_momentum, 0.999, 1e-8, 1e-2, true});
    return std::max({rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.m),
                     rel_err(floats(rout[2]), st.v), kept(rout)});
  };
}

}  // namespace fresco::check
