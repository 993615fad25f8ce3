// fresco-plugin-check's reference cases for batchnorm (training, with the residual add), its folded inference
// form, channel_affine, the backward (op_cases.h says what a case is).
#include "cases/case_families.h"
#include "cases/case_helpers.h"
#include "reference/batchnorm.h"

namespace fresco::check {

bool batchnorm_case(const std::string& op, std::mt19937& rng, OpCase* c) {
  // batchnorm, training mode: y, save_mean, save_invstd and the running statistics; batchnorm_add: the same
  // with y = relu(bn(x) + r)
  if (op == FR_OP_BATCHNORM || op == FR_OP_BATCHNORM_ADD) {
    const bool add = op == FR_OP_BATCHNORM_ADD;
    const int64_t n = 3, h = 5, w = 7, ch = 6, rows = n * h * w;
    const auto x = random(rng, rows * ch, -1.0f, 3.0f), g = random(rng, ch, 0.5f, 1.5f), b = random(rng, ch);
    const auto res = add ? random(rng, rows * ch) : std::vector<float>{};
    const auto rm = random(rng, ch), rv = random(rng, ch, 0.5f, 1.5f);
    c->in = {f32(x, {n, h, w, ch}), f32(g, {1, 1, 1, ch}), f32(b, {1, 1, 1, ch})};
    if (add) c->in.push_back(f32(res, {n, h, w, ch}));
    c->out = {f32(std::vector<float>(x.size(), NAN), {n, h, w, ch}),
              f32(std::vector<float>(ch, NAN), {1, 1, 1, ch}),
              f32(std::vector<float>(ch, NAN), {1, 1, 1, ch})};
    c->rout = {f32(rm, {1, 1, 1, ch}), f32(rv, {1, 1, 1, ch})};
    c->params = params_of(FrBatchNormParams{1e-5f, 0.1f, 1, add ? 1 : 0});
    c->error = [=](const auto& out, const auto& rout) {
      std::vector<double> m = widen(rm), v = widen(rv);
      auto r = ref::batchnorm_train(widen(x), widen(g), widen(b), rows, ch, 1e-5, 0.1, &m, &v);
      for (size_t i = 0; i < res.size(); ++i) r.y[i] = std::max(0.0, r.y[i] + res[i]);
      return std::max({rel_err(floats(out[0]), r.y), rel_err(floats(out[1]), r.mean),
                       rel_err(floats(out[2]), r.invstd), rel_err(floats(rout[0]), m),
                       rel_err(floats(rout[1]), v)});
    };
    return true;
  }
  if (op == FR_OP_BATCHNORM_FOLD) {  // scale = gamma / sqrt(running_var + eps), shift = beta - mean * scale
    const int64_t ch = 37;
    const auto g = random(rng, ch, 0.5f, 1.5f), b = random(rng, ch), rm = random(rng, ch);
    const auto rv = random(rng, ch, 0.01f, 2.0f);
    c->in = {f32(g, {1, 1, 1, ch}), f32(b, {1, 1, 1, ch}), f32(rm, {1, 1, 1, ch}), f32(rv, {1, 1, 1, ch})};
    c->out = {f32(std::vector<float>(ch, NAN), {1, 1, 1, ch}),
              f32(std::vector<float>(ch, NAN), {1, 1, 1, ch})};
    c->params = params_of(FrBatchNormParams{1e-5f, 0.1f, 0, 0});
    c->error = [=](const auto& out, const auto&) {
      std::vector<double> scale(ch), shift(ch);
      for (int64_t i = 0; i < ch; ++i) {
        scale[i] = g[i] / std::sqrt(static_cast<double>(rv[i]) + 1e-5);
        shift[i] = b[i] - rm[i] * scale[i];
      }
      return std::max(rel_err(floats(out[0]), scale), rel_err(floats(out[1]), shift));
    };
    return true;
  }
  if (op == FR_OP_CHANNEL_AFFINE) {  // y = max(x * scale + shift, 0) per channel
    const int64_t n = 3, h = 5, w = 7, ch = 16, rows = n * h * w;
    const auto x = random(rng, rows * ch), sc = random(rng, ch, 0.5f, 1.5f), sh = random(rng, ch);
    c->in = {f32(x, {n, h, w, ch}), f32(sc, {1, 1, 1, ch}), f32(sh, {1, 1, 1, ch})};
    c->out = {f32(std::vector<float>(x.size(), NAN), {n, h, w, ch})};
    c->params = params_of(FrChannelAffineParams{1, 0});
    c->error = [=](const auto& out, const auto&) {
      std::vector<double> y(x.size());
      for (int64_t i = 0; i < rows * ch; ++i)
        y[i] = std::max(0.0, static_cast<double>(x[i]) * sc[i % ch] + sh[i % ch]);
      return rel_err(floats(out[0]), y);
    };
    return true;
  }
  if (op == FR_OP_BATCHNORM_BACKWARD) {
    const int64_t n = 3, h = 5, w = 7, ch = 6, rows = n * h * w;
    const auto dy = random(rng, rows * ch), x = random(rng, rows * ch, -1.0f, 3.0f);
    const auto g = random(rng, ch, 0.5f, 1.5f), mean = random(rng, ch, 0.5f, 1.5f);
    const auto invstd = random(rng, ch, 0.5f, 1.5f);
    c->in = {f32(dy, {n, h, w, ch}), f32(x, {n, h, w, ch}), f32(g, {1, 1, 1, ch}), f32(mean, {1, 1, 1, ch}),
             f32(invstd, {1, 1, 1, ch})};
    c->out = {f32(std::vector<float>(x.size(), NAN), {n, h, w, ch}),
              f32(std::vector<float>(ch, NAN), {1, 1, 1, ch}),
              f32(std::vector<float>(ch, NAN), {1, 1, 1, ch})};
    c->error = [=](const auto& out, const auto&) {
      const auto r =
          ref::batchnorm_backward(widen(dy), widen(x), widen(g), widen(mean), widen(invstd), rows, ch);
      return std::max({rel_err(floats(out[0]), r.dx), rel_err(floats(out[1]), r.dgamma),
                       rel_err(floats(out[2]), r.dbeta)});
    };
    return true;
  }
  return false;
}

}  // namespace fresco::check
