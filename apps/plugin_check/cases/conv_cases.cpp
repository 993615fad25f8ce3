// fresco-plugin-check's reference cases for conv2d and its backward, max / average / global average pools,
// flatten in C,H,W order, concat (op_cases.h says what a case is).
#include "cases/case_families.h"
#include "cases/case_helpers.h"
#include "reference/conv2d.h"
#include "reference/gelu.h"  // flatten_chw
#include "reference/pointwise.h"
#include "reference/pool.h"

namespace fresco::check {

bool conv_case(const std::string& op, std::mt19937& rng, OpCase* c) {
  if (op == FR_OP_CONV2D || op == FR_OP_CONV2D_BACKWARD) {
    // 3x3, stride 2, pad 1, dilation 1x2, groups 2, bias; odd sizes.
    const ref::ConvShape sh{3, 11, 10, 6, 8, 3, 3, 2, 2, 1, 1, 1, 2, 2};
    const FrConvParams cp{3, 3, 2, 2, 1, 1, 1, 2, 2, 1};
    const int64_t P = sh.p(), Q = sh.q(), cg = sh.c / sh.groups;
    const auto x = random(rng, sh.x_size()), w = random(rng, sh.w_size(), -0.5f, 0.5f);
    if (op == FR_OP_CONV2D) {
      const auto b = random(rng, sh.k);
      c->in = {f32(x, {sh.n, sh.h, sh.w, sh.c}), f32(w, {sh.k, sh.r, sh.s, cg}), f32(b, {1, 1, 1, sh.k})};
      c->out = {f32(std::vector<float>(sh.y_size(), NAN), {sh.n, P, Q, sh.k})};
      c->params = params_of(cp);
      c->error = [=](const auto& out, const auto&) {
        return rel_err(floats(out[0]), ref::conv2d_forward(widen(x), widen(w), widen(b), sh));
      };
    } else {
      const auto dy = random(rng, sh.y_size());
      c->in = {f32(dy, {sh.n, P, Q, sh.k}), f32(x, {sh.n, sh.h, sh.w, sh.c}), f32(w, {sh.k, sh.r, sh.s, cg})};
      c->out = {f32(std::vector<float>(sh.w_size(), NAN), {sh.k, sh.r, sh.s, cg}),
                f32(std::vector<float>(sh.k, NAN), {1, 1, 1, sh.k}),
                f32(std::vector<float>(sh.x_size(), NAN), {sh.n, sh.h, sh.w, sh.c})};
      c->params = params_of(FrConvBackwardParams{cp, 1, 0});
      c->error = [=](const auto& out, const auto&) {
        const auto g = ref::conv2d_backward(widen(dy), widen(x), widen(w), sh);
        return std::max(
            {rel_err(floats(out[0]), g.dw), rel_err(floats(out[1]), g.db), rel_err(floats(out[2]), g.dx)});
      };
    }
    return true;
  }
  if (op == FR_OP_MAX_POOL2D || op == FR_OP_MAX_POOL2D_BACKWARD || op == FR_OP_AVG_POOL2D ||
      op == FR_OP_AVG_POOL2D_BACKWARD) {
    // 3x3, stride 2, pad 1 (overlapping windows, padded borders); odd sizes.
    const ref::PoolShape s{3, 11, 10, 6, 3, 3, 2, 2, 1, 1};
    const int64_t P = s.p(), Q = s.q();
    const auto x = random(rng, s.in_size()), dy = random(rng, s.out_size());
    const bool is_max = op == FR_OP_MAX_POOL2D || op == FR_OP_MAX_POOL2D_BACKWARD;
    const bool fwd = op == FR_OP_MAX_POOL2D || op == FR_OP_AVG_POOL2D;
    c->params = params_of(FrPoolParams{3, 3, 2, 2, 1, 1});
    if (fwd) {
      c->in = {f32(x, {s.n, s.h, s.w, s.c})};
      c->out = {f32(std::vector<float>(s.out_size(), NAN), {s.n, P, Q, s.c})};
      c->tolerance = is_max ? 0.0 : 1e-6;
      c->error = [=](const auto& out, const auto&) {
        return rel_err(floats(out[0]), is_max ? ref::max_pool2d(widen(x), s) : ref::avg_pool2d(widen(x), s));
      };
    } else {
      const auto y_ref = ref::max_pool2d(widen(x), s);
      const std::vector<float> y(y_ref.begin(), y_ref.end());
      c->in = is_max ? std::vector<Operand>{f32(dy, {s.n, P, Q, s.c}), f32(x, {s.n, s.h, s.w, s.c}),
                                            f32(y, {s.n, P, Q, s.c})}
                     : std::vector<Operand>{f32(dy, {s.n, P, Q, s.c})};
      c->out = {f32(std::vector<float>(s.in_size(), NAN), {s.n, s.h, s.w, s.c})};
      c->tolerance = 1e-6;
      c->error = [=](const auto& out, const auto&) {
        return rel_err(floats(out[0]), is_max ? ref::max_pool2d_backward(widen(dy), widen(x), s)
                                              : ref::avg_pool2d_backward(widen(dy), s));
      };
    }
    return true;
  }
  if (op == FR_OP_GLOBAL_AVG_POOL || op == FR_OP_GLOBAL_AVG_POOL_BACKWARD) {
    const int64_t n = 3, h = 7, w = 5, ch = 6;
    const auto x = random(rng, n * h * w * ch), dy = random(rng, n * ch);
    const bool fwd = op == FR_OP_GLOBAL_AVG_POOL;
    c->in = {fwd ? f32(x, {n, h, w, ch}) : f32(dy, {n, 1, 1, ch})};
    c->out = {fwd ? f32(std::vector<float>(n * ch, NAN), {n, 1, 1, ch})
                  : f32(std::vector<float>(x.size(), NAN), {n, h, w, ch})};
    c->tolerance = 1e-6;
    c->error = [=](const auto& out, const auto&) {
      return rel_err(floats(out[0]), fwd ? ref::global_avg_pool(widen(x), n, h * w, ch)
                                         : ref::global_avg_pool_backward(widen(dy), n, h * w, ch));
    };
    return true;
  }
  if (op == FR_OP_FLATTEN_CHW || op == FR_OP_FLATTEN_CHW_BACKWARD) {
    const int64_t n = 3, h = 5, w = 7, ch = 6;
    const auto x = random(rng, n * h * w * ch);
    const bool fwd = op == FR_OP_FLATTEN_CHW;
    c->in = {fwd ? f32(x, {n, h, w, ch}) : f32(x, {n, 1, 1, ch * h * w})};
    c->out = {fwd ? f32(std::vector<float>(x.size(), NAN), {n, 1, 1, ch * h * w})
                  : f32(std::vector<float>(x.size(), NAN), {n, h, w, ch})};
    c->tolerance = 0.0;
    c->error = [=](const auto& out, const auto&) {
      return rel_err(floats(out[0]), fwd ? ref::flatten_chw(widen(x), n, h, w, ch)
                                         : ref::flatten_chw_backward(widen(x), n, h, w, ch));
    };
    return true;
  }
  if (op == FR_OP_CONCAT || op == FR_OP_CONCAT_BACKWARD) {  // 6 positions, 5 + 3 channels: exact copies
    const int64_t rows = 6, ca = 5, cb = 3;
    const auto a = random(rng, rows * ca), b = random(rng, rows * cb), y = random(rng, rows * (ca + cb));
    std::vector<double> joined, part_a, part_b;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < ca; ++k)
        joined.push_back(a[r * ca + k]), part_a.push_back(y[r * (ca + cb) + k]);
      for (int64_t k = 0; k < cb; ++k)
        joined.push_back(b[r * cb + k]), part_b.push_back(y[r * (ca + cb) + ca + k]);
    }
    c->tolerance = 0.0;
    if (op == FR_OP_CONCAT) {
      c->in = {f32(a, {1, 2, 3, ca}), f32(b, {1, 2, 3, cb})};
      c->out = {f32(std::vector<float>(rows * (ca + cb), NAN), {1, 2, 3, ca + cb})};
      c->error = [joined](const auto& out, const auto&) { return rel_err(floats(out[0]), joined); };
    } else {
      c->in = {f32(y, {1, 2, 3, ca + cb})};
      c->out = {f32(std::vector<float>(rows * ca, NAN), {1, 2, 3, ca}),
                f32(std::vector<float>(rows * cb, NAN), {1, 2, 3, cb})};
      c->error = [part_a, part_b](const auto& out, const auto&) {
        return std::max(rel_err(floats(out[0]), part_a), rel_err(floats(out[1]), part_b));
      };
    }
    return true;
  }
  return false;
}

}  // namespace fresco::check
