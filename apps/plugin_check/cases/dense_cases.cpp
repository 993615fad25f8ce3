// fresco-plugin-check's reference cases for fc and its backward, softmax cross-entropy and the fused fc +
// softmax cross-entropy head (op_cases.h says what a case is).
#include "cases/case_families.h"
#include "cases/case_helpers.h"
#include "reference/fc.h"
#include "reference/softmax_xent.h"

namespace fresco::check {

bool dense_case(const std::string& op, std::mt19937& rng, OpCase* c) {
  if (op == FR_OP_FC) {
    const auto x = random(rng, M * K), w = random(rng, N * K), b = random(rng, N);
    c->in = {f32(x, {M, 1, 1, K}), f32(w, {N, 1, 1, K}), f32(b, {1, 1, 1, N})};
    c->out = {f32(std::vector<float>(M * N, NAN), {M, 1, 1, N})};
    c->params = params_of(FrFcParams{1, 1});
    c->error = [=](const auto& out, const auto&) {
      return rel_err(floats(out[0]), ref::fc_forward(widen(x), widen(w), widen(b), M, K, N, true));
    };
    return true;
  }
  if (op == FR_OP_FC_BACKWARD) {
    const auto dy = random(rng, M * N), x = random(rng, M * K), w = random(rng, N * K);
    c->in = {f32(dy, {M, 1, 1, N}), f32(x, {M, 1, 1, K}), f32(w, {N, 1, 1, K})};
    c->out = {f32(std::vector<float>(N * K, NAN), {N, 1, 1, K}),
              f32(std::vector<float>(N, NAN), {1, 1, 1, N}),
              f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->params = params_of(FrFcBackwardParams{1, 1, 0, 0});
    c->error = [=](const auto& out, const auto&) {
      const auto g = ref::fc_backward(widen(dy), widen(x), widen(w), M, K, N);
      return std::max(
          {rel_err(floats(out[0]), g.dw), rel_err(floats(out[1]), g.db), rel_err(floats(out[2]), g.dx)});
    };
    return true;
  }
  if (op == FR_OP_SOFTMAX_XENT) {
    const int64_t C = 10;
    const auto z = random(rng, M * C, -3.0f, 3.0f);
    std::uniform_int_distribution<int32_t> d(0, C - 1);
    std::vector<int32_t> y(M);
    for (auto& v : y) v = d(rng);
    c->in = {f32(z, {M, 1, 1, C}), raw(y, FR_I32, {M, 1, 1, 1})};
    c->out = {f32(std::vector<float>(M * C, NAN), {M, 1, 1, C})};
    c->rout = {pod(FrBatchResults{})};
    c->params = params_of(FrSoftmaxXentParams{0.1f, 1});
    c->error = [=](const auto& out, const auto& rout) {
      FrBatchResults r;
      std::memcpy(&r, rout[0].data(), sizeof r);
      const double loss = ref::softmax_xent_loss(widen(z), y, M, C, 0.1);
      const double hits = static_cast<double>(ref::top1_hits(widen(z), y, M, C));
      return std::max({rel_err(floats(out[0]), ref::softmax_xent_grad(widen(z), y, M, C, 0.1)),
                       std::fabs(r.loss - loss) / std::fabs(loss), std::fabs(r.correct - hits),
                       std::fabs(r.samples - static_cast<double>(M))});
    };
    return true;
  }
  // the fused training head: logits, dlogits, the masked input gradient and the batch results
  if (op == FR_OP_FC_SOFTMAX_XENT) {
    const int64_t C = 10;
    auto x = random(rng, M * K);
    for (float& v : x) v = v > 0.0f ? v : 0.0f;  // a relu's output: the mask matters
    const auto w = random(rng, C * K), b = random(rng, C);
    std::uniform_int_distribution<int32_t> d(0, C - 1);
    std::vector<int32_t> y(M);
    for (auto& v : y) v = d(rng);
    c->in = {f32(x, {M, 1, 1, K}), f32(w, {C, 1, 1, K}), raw(y, FR_I32, {M, 1, 1, 1}), f32(b, {1, 1, 1, C})};
    c->out = {f32(std::vector<float>(M * C, NAN), {M, 1, 1, C}),
              f32(std::vector<float>(M * C, NAN), {M, 1, 1, C}),
              f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->rout = {pod(FrBatchResults{})};
    c->params = params_of(FrFcSoftmaxXentParams{1, 1, 0.1f, 0});
    c->error = [=](const auto& out, const auto& rout) {
      const auto z = ref::fc_forward(widen(x), widen(w), widen(b), M, K, C);
      const auto dz = ref::softmax_xent_grad(z, y, M, C, 0.1);
      auto dx = ref::fc_backward(dz, widen(x), widen(w), M, K, C).dx;
      for (size_t i = 0; i < dx.size(); ++i)
        if (x[i] <= 0.0f) dx[i] = 0.0;
      FrBatchResults r;
      std::memcpy(&r, rout[0].data(), sizeof r);
      const double loss = ref::softmax_xent_loss(z, y, M, C, 0.1);
      const double hits = static_cast<double>(ref::top1_hits(z, y, M, C));
      return std::max({rel_err(floats(out[0]), z), rel_err(floats(out[1]), dz), rel_err(floats(out[2]), dx),
                       std::fabs(r.loss - loss) / std::fabs(loss), std::fabs(r.correct - hits),
                       std::fabs(r.samples - static_cast<double>(M))});
    };
    return true;
  }
  return false;
}

}  // namespace fresco::check
