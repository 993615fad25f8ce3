// fresco-plugin-check's reference cases for relu, dropout, the residual join's masking pass, add / add_relu,
// GELU, SiLU, sigmoid, tanh (op_cases.h says what a case is).
#include "cases/case_families.h"
#include "cases/case_helpers.h"
#include "reference/activations.h"
#include "reference/dropout.h"
#include "reference/gelu.h"
#include "reference/pointwise.h"

namespace fresco::check {

bool pointwise_case(const std::string& op, std::mt19937& rng, OpCase* c) {
  if (op == FR_OP_RELU || op == FR_OP_RELU_BACKWARD) {
    const auto a = random(rng, M * K), b = random(rng, M * K);
    const bool fwd = op == FR_OP_RELU;
    c->in = fwd ? std::vector<Operand>{f32(a, {M, 1, 1, K})}
                : std::vector<Operand>{f32(a, {M, 1, 1, K}), f32(b, {M, 1, 1, K})};
    c->out = {f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->tolerance = 0.0;
    c->error = [=](const auto& out, const auto&) {
      return rel_err(floats(out[0]), fwd ? ref::relu(widen(a)) : ref::relu_backward(widen(a), widen(b)));
    };
    return true;
  }
  if (op == FR_OP_DROPOUT || op == FR_OP_DROPOUT_BACKWARD) {
    const auto x = random(rng, M * K);
    const FrStepScalars s = scalars(7);
    c->in = {f32(x, {M, 1, 1, K})};
    c->out = {f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->rin = {pod(s)};
    c->params = params_of(FrDropoutParams{0.3f, 4});
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      const uint64_t sd = (static_cast<uint64_t>(s.seed_hi) << 32) | s.seed_lo;
      return rel_err(floats(out[0]),
                     ref::dropout_apply(widen(x), ref::dropout_mask(sd, 4, 7, x.size(), 0.3f), 0.3));
    };
    return true;
  }
  if (op == FR_OP_ADD_RELU_BACKWARD) {  // dx = (a + b) * (y > 0)
    const int64_t n = 1003;
    const auto a = random(rng, n), b = random(rng, n), y = random(rng, n);
    c->in = {f32(a, {n, 1, 1, 1}), f32(b, {n, 1, 1, 1}), f32(y, {n, 1, 1, 1})};
    c->out = {f32(std::vector<float>(n, NAN), {n, 1, 1, 1})};
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = y[i] > 0.0f ? static_cast<double>(a[i]) + b[i] : 0.0;
      return rel_err(floats(out[0]), want);
    };
    return true;
  }
  if (op == FR_OP_ADD || op == FR_OP_ADD_RELU || op == FR_OP_GELU || op == FR_OP_GELU_BACKWARD) {
    const auto a = random(rng, M * K, -4.0f, 4.0f), b = random(rng, M * K);
    const bool unary = op == FR_OP_GELU;
    c->in = unary ? std::vector<Operand>{f32(a, {M, 1, 1, K})}
                  : std::vector<Operand>{f32(a, {M, 1, 1, K}), f32(b, {M, 1, 1, K})};
    c->out = {f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      if (op == FR_OP_ADD) return rel_err(floats(out[0]), ref::add(widen(a), widen(b)));
      if (op == FR_OP_ADD_RELU) {
        std::vector<double> want = ref::add(widen(a), widen(b));
        for (double& v : want) v = v > 0.0 ? v : 0.0;
        return rel_err(floats(out[0]), want);
      }
      return rel_err(floats(out[0]), unary ? ref::gelu(widen(a)) : ref::gelu_backward(widen(a), widen(b)));
    };
    return true;
  }
  if (op == FR_OP_SILU || op == FR_OP_SIGMOID || op == FR_OP_TANH || op == FR_OP_SILU_BACKWARD ||
      op == FR_OP_SIGMOID_BACKWARD || op == FR_OP_TANH_BACKWARD) {
    // Backward: in {dy, x} for silu, {dy, y} for sigmoid and tanh (y drawn from the output's range).
    const bool fwd = op == FR_OP_SILU || op == FR_OP_SIGMOID || op == FR_OP_TANH;
    const float lo = op == FR_OP_SIGMOID_BACKWARD ? 0.0f : op == FR_OP_TANH_BACKWARD ? -1.0f : -4.0f;
    const float hi = op == FR_OP_SIGMOID_BACKWARD || op == FR_OP_TANH_BACKWARD ? 1.0f : 4.0f;
    const auto a = random(rng, M * K), b = random(rng, M * K, lo, hi), x = random(rng, M * K, -4.0f, 4.0f);
    c->in = fwd ? std::vector<Operand>{f32(x, {M, 1, 1, K})}
                : std::vector<Operand>{f32(a, {M, 1, 1, K}), f32(b, {M, 1, 1, K})};
    c->out = {f32(std::vector<float>(M * K, NAN), {M, 1, 1, K})};
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      const std::vector<float> y = floats(out[0]);
      if (op == FR_OP_SILU) return rel_err(y, ref::silu(widen(x)));
      if (op == FR_OP_SIGMOID) return rel_err(y, ref::sigmoid(widen(x)));
      if (op == FR_OP_TANH) return rel_err(y, ref::tanh(widen(x)));
      if (op == FR_OP_SILU_BACKWARD) return rel_err(y, ref::silu_backward(widen(a), widen(b)));
      if (op == FR_OP_SIGMOID_BACKWARD) return rel_err(y, ref::sigmoid_backward(widen(a), widen(b)));
      return rel_err(y, ref::tanh_backward(widen(a), widen(b)));
    };
    return true;
  }
  return false;
}

}  // namespace fresco::check
