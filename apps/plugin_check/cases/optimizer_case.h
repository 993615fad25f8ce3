// An optimizer update's reference case for fresco-plugin-check (step_cases.cpp, variant_cases.cpp):
// sgd_update (Nesterov, weight decay 5e-4) or adam_update (AdamW, weight decay 1e-2) over n weights, checked
// against reference/optimizers.h. The caller gives the kernel's gradient range and any optional form's flags.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "cases/case_helpers.h"
#include "reference/optimizers.h"

namespace fresco::check {

// Fills c's weights (and buffers), params and error for `op` (sgd_update or adam_update) at step scalars s:
// the kernel reads rin {grads, s[, table]} as the caller sets them, the reference takes the gradients as `g`
// and the momentum (Adam: beta1) `ref_momentum`; `param_momentum` is what the params carry (a momentum
// table's case gives the kernel its table and the reference the table's entry).
inline void optimizer_case(const std::string& op, std::mt19937& rng, const std::vector<double>& g,
                           const FrStepScalars& s, float param_momentum, double ref_momentum, OpCase* c) {
  const size_t n = g.size();
  const int64_t len = static_cast<int64_t>(n);
  const auto w = random(rng, n), m = random(rng, n), v = random(rng, n, 0.01f, 1.0f);
  if (op == FR_OP_SGD_UPDATE) {
    c->rout = {f32(w, {1, 1, 1, len}), f32(m, {1, 1, 1, len})};
    c->params = params_of(FrSgdParams{param_momentum, 5e-4f, 1, 0});
    c->error = [=](const auto&, const auto& rout) {
      ref::SgdState st{widen(w), widen(m), true};
      ref::sgd_step(st, g, s.lr, ref::SgdConfig{ref_momentum, 5e-4, true});
      return std::max(rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.buf));
    };
    return;
  }
  c->rout = {f32(w, {1, 1, 1, len}), f32(m, {1, 1, 1, len}), f32(v, {1, 1, 1, len})};
  c->params = params_of(FrAdamParams{param_momentum, 0.999f, 1e-8f, 1e-2f, 1, 0});
  c->error = [=](const auto&, const auto& rout) {
    ref::AdamState st{widen(w), widen(m), widen(v), s.step};
    ref::adam_step(st, g, s.lr, ref::AdamConfig{ref_momentum, 0.999, 1e-8, 1e-2, true});
    return std::max(
        {rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.m), rel_err(floats(rout[2]), st.v)});
  };
}

}  // namespace fresco::check
