// fresco-plugin-check's reference cases for the step's other ops: input normalisation, casts, clear / copy,
// metrics, the lr schedule, unscale, the gradients' check, the loss scale update, the skipped step's
// restore, SGD, Adam and the EMA
// (SGD's and Adam's through optimizer_case.h) (op_cases.h says what a case is).
#include "cases/case_families.h"
#include "cases/case_helpers.h"
#include "cases/optimizer_case.h"
#include "reference/lr_schedule.h"
#include "reference/normalize_input.h"
#include "reference/optimizers.h"
#include "reference/pointwise.h"

namespace fresco::check {

bool step_case(const std::string& op, std::mt19937& rng, OpCase* c) {
  if (op == FR_OP_NORMALIZE_INPUT) {
    std::uniform_int_distribution<int> d(0, 255);
    std::vector<uint8_t> x(5 * 7 * 7 * 3);
    for (auto& v : x) v = static_cast<uint8_t>(d(rng));
    const FrNormalizeParams p{3, {0.49f, 0.48f, 0.45f, 0}, {0.25f, 0.24f, 0.26f, 1}};
    c->in = {raw(x, FR_U8, {5, 7, 7, 3})};
    c->out = {f32(std::vector<float>(x.size(), NAN), {5, 7, 7, 3})};
    c->params = params_of(p);
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      return rel_err(floats(out[0]), ref::normalize_input(x, 3, p.mean, p.std));
    };
    return true;
  }
  if (op == FR_OP_CAST || op == FR_OP_CAST_RANGE) {  // f32 -> bf16, exact rounding to nearest even
    const std::vector<float> a = random(rng, 1000, -50.0f, 50.0f);
    const Operand src = f32(a, {1, 1, 1, 1000});
    const Operand dst = raw(std::vector<uint16_t>(1000, 0xffffu), FR_BF16, {1, 1, 1, 1000});
    std::vector<double> want(1000);
    for (size_t i = 0; i < 1000; ++i) want[i] = bf16_round(a[i]);
    const bool range = op == FR_OP_CAST_RANGE;
    if (range) {
      c->rin = {src};
      c->rout = {dst};
    } else {
      c->in = {src};
      c->out = {dst};
    }
    c->dtype = FR_BF16;
    c->tolerance = 0.0;
    c->error = [want, range](const auto& out, const auto& rout) {
      return rel_err(bf16_values(range ? rout[0] : out[0]), want);
    };
    return true;
  }
  if (op == FR_OP_CLEAR || op == FR_OP_COPY) {
    const auto a = random(rng, 1000);
    const bool copy = op == FR_OP_COPY;
    if (copy) c->rin = {f32(a, {1, 1, 1, 1000})};
    c->rout = {f32(copy ? std::vector<float>(1000, NAN) : a, {1, 1, 1, 1000})};
    c->tolerance = 0.0;
    c->error = [=](const auto&, const auto& rout) {
      return rel_err(floats(rout[0]), copy ? widen(a) : std::vector<double>(1000, 0.0)) +
             (copy ? 0.0 : (floats(rout[0]) == std::vector<float>(1000, 0.0f) ? 0.0 : 1.0));
    };
    return true;
  }
  if (op == FR_OP_ACCUMULATE_METRICS) {
    const FrBatchResults b{1.5f, 20.0f, 37.0f, 0.0f};
    FrMetricAccumulators a{};
    a.loss_sum = 3.0, a.correct = 5.0, a.samples = 10.0, a.batches = 1.0;
    c->rin = {pod(b)};
    c->rout = {pod(a)};
    c->tolerance = 1e-12;
    c->error = [=](const auto&, const auto& rout) {
      FrMetricAccumulators r;
      std::memcpy(&r, rout[0].data(), sizeof r);
      return std::fabs(r.loss_sum - (3.0 + 1.5 * 37.0)) + std::fabs(r.correct - 25.0) +
             std::fabs(r.samples - 47.0) + std::fabs(r.batches - 2.0);
    };
    return true;
  }
  if (op == FR_OP_LR_SCHEDULE || op == FR_OP_STEP_DONE) {
    const bool sched = op == FR_OP_LR_SCHEDULE;
    const FrScheduleParams p{FR_SCHED_COSINE, 2, 10, 0.1f, 0.001f, 0};
    c->rin = {f32({0.0f}, {1, 1, 1, 1})};
    c->rout = {pod(scalars(5))};
    c->params = params_of(p);
    c->tolerance = 1e-6;
    c->error = [=](const auto&, const auto& rout) {
      FrStepScalars s;
      std::memcpy(&s, rout[0].data(), sizeof s);
      const int32_t step = sched ? 5 : 6;  // step_done advances first, then writes the new step's lr
      const double want = ref::cosine_lr(0.1, 0.001, 2, 10, step);
      return std::fabs(s.lr - want) / want + (s.step == step ? 0.0 : 1.0);
    };
    return true;
  }
  if (op == FR_OP_UNSCALE_GRADS) {  // finite gradients: divided by the scale, the step not skipped
    const std::vector<float> g = random(rng, 1000, -4096.0f, 4096.0f);
    FrStepScalars sc = scalars(3);
    sc.loss_scale = 1024.0f;
    c->rout = {f32(g, {1, 1, 1, 1000}), pod(sc)};
    c->tolerance = 0.0;
    c->error = [g](const auto&, const auto& rout) {
      std::vector<double> want(g.size());
      for (size_t i = 0; i < g.size(); ++i) want[i] = static_cast<double>(g[i] * (1.0f / 1024.0f));
      FrStepScalars s;
      std::memcpy(&s, rout[1].data(), sizeof s);
      return rel_err(floats(rout[0]), want) + (s.skip_step == 0 ? 0.0 : 1.0);
    };
    return true;
  }
  if (op == FR_OP_CHECK_GRADS) {  // bf16 gradients, one of them inf: the step skipped, nothing else written
    const std::vector<float> a = random(rng, 1000, -4.0f, 4.0f);
    std::vector<uint16_t> g(a.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = bf16_bits(a[i]);
    g[617] = 0x7f80u;  // +inf
    FrStepScalars sc = scalars(3);
    sc.loss_scale = 1024.0f;
    c->rin = {raw(g, FR_BF16, {1, 1, 1, 1000})};
    c->rout = {pod(sc)};
    c->tolerance = 0.0;
    sc.skip_step = 1;
    c->error = scalars_error(sc);
    return true;
  }
  if (op == FR_OP_RESTORE_IF_SKIPPED) {  // a skipped step: two groups {w, m, 16-bit copy} (an f16 copy, then
    // a bf16 one with a tail past the 16-byte words) get their backups back and the copies their casts
    const size_t n0 = 1024, n1 = 257;
    const auto w0 = random(rng, n0), m0 = random(rng, n0), w1 = random(rng, n1), m1 = random(rng, n1);
    FrStepScalars sc = scalars(3);
    sc.skip_step = 1;
    auto len = [](size_t n) { return static_cast<int64_t>(n); };
    c->rin = {f32(w0, {1, 1, 1, len(n0)}), f32(m0, {1, 1, 1, len(n0)}), f32(w1, {1, 1, 1, len(n1)}),
              f32(m1, {1, 1, 1, len(n1)}), pod(sc)};
    auto nan = [&](size_t n) { return f32(std::vector<float>(n, NAN), {1, 1, 1, len(n)}); };
    auto junk = [&](size_t n, uint32_t dt) {
      return raw(std::vector<uint16_t>(n, 0xffffu), dt, {1, 1, 1, len(n)});
    };
    c->rout = {nan(n0), nan(n0), junk(n0, FR_F16), nan(n1), nan(n1), junk(n1, FR_BF16)};
    c->params = params_of(FrRestoreParams{2, 1});
    c->tolerance = 0.0;
    c->error = [=](const auto&, const auto& rout) {
      std::vector<double> h(n0), b(n1);  // f16 through the compiler's _Float16 (nearest even)
      std::vector<float> got_h(n0);
      for (size_t i = 0; i < n0; ++i) {
        h[i] = static_cast<double>(static_cast<_Float16>(w0[i]));
        _Float16 v;
        std::memcpy(&v, rout[2].data() + 2 * i, 2);
        got_h[i] = static_cast<float>(v);
      }
      for (size_t i = 0; i < n1; ++i) b[i] = bf16_round(w1[i]);
      return rel_err(floats(rout[0]), widen(w0)) + rel_err(floats(rout[1]), widen(m0)) + rel_err(got_h, h) +
             rel_err(floats(rout[3]), widen(w1)) + rel_err(floats(rout[4]), widen(m1)) +
             rel_err(bf16_values(rout[5]), b);
    };
    return true;
  }
  if (op == FR_OP_LOSS_SCALE_UPDATE) {  // after a skipped step: backoff and tracker reset
    FrStepScalars sc = scalars(3);
    sc.loss_scale = 1024.0f;
    sc.skip_step = 1;
    sc.growth_tracker = 5;
    c->rout = {pod(sc)};
    c->params = params_of(FrLossScaleParams{2.0f, 0.5f, 2000, 0});
    c->tolerance = 0.0;
    c->error = [](const auto&, const auto& rout) {
      FrStepScalars s;
      std::memcpy(&s, rout[0].data(), sizeof s);
      return std::fabs(s.loss_scale - 512.0) + (s.growth_tracker == 0 ? 0.0 : 1.0);
    };
    return true;
  }
  if (op == FR_OP_SGD_UPDATE || op == FR_OP_ADAM_UPDATE) {
    const auto g = random(rng, 4096 + 17);
    const FrStepScalars s = scalars(3);
    c->rin = {f32(g, {1, 1, 1, static_cast<int64_t>(g.size())}), pod(s)};
    optimizer_case(op, rng, widen(g), s, 0.9f, 0.9, c);
    return true;
  }
  if (op == FR_OP_LARS_UPDATE) {    // one tensor: its trust ratio, then the momentum step
    const size_t n = 3 * 8192 + 5;  // several blocks' partial norms on a GPU
    const auto w = random(rng, n), g = random(rng, n), m = random(rng, n);
    const FrStepScalars s = scalars(3);
    const int64_t len = static_cast<int64_t>(n);
    c->rin = {f32(g, {1, 1, 1, len}), pod(s)};
    c->rout = {f32(w, {1, 1, 1, len}), f32(m, {1, 1, 1, len})};
    c->params = params_of(FrLarsParams{0.9f, 5e-4f, 0.02f, 0});
    c->error = [=](const auto&, const auto& rout) {
      ref::SgdState st{widen(w), widen(m), true};
      ref::lars_step(st, widen(g), s.lr, ref::LarsConfig{0.9, 5e-4, 0.02});
      return std::max(rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.buf));
    };
    return true;
  }
  if (op == FR_OP_EMA_UPDATE) {  // after step 5 with every 3: the average moves (decay 0.9), in double
    const size_t n = 4096 + 17;
    const auto e = random(rng, n), w = random(rng, n);
    const FrStepScalars s = scalars(5);
    c->rin = {f32(w, {1, 1, 1, static_cast<int64_t>(n)}), pod(s)};
    c->rout = {f32(e, {1, 1, 1, static_cast<int64_t>(n)})};
    c->params = params_of(FrEmaParams{static_cast<float>(1.0 - 0.9), 3});
    c->error = [=](const auto&, const auto& rout) {
      std::vector<double> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = 0.9 * e[i] + 0.1 * w[i];
      return rel_err(floats(rout[0]), want);
    };
    return true;
  }
  return false;
}

}  // namespace fresco::check
