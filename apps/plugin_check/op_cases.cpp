// Reference cases of the built-in ops for fresco-plugin-check (see op_cases.h).
#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "reference/activations.h"
#include "reference/batchnorm.h"
#include "reference/conv2d.h"
#include "reference/dropout.h"
#include "reference/fc.h"
#include "reference/gelu.h"
#include "reference/lr_schedule.h"
#include "reference/normalize_input.h"
#include "reference/optimizers.h"
#include "reference/pointwise.h"
#include "reference/pool.h"
#include "reference/softmax_xent.h"

namespace fresco::check {

namespace {
using Bytes = std::vector<uint8_t>;

Operand f32(std::vector<float> v, std::initializer_list<int64_t> dims) {
  Operand o;
  o.host.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(o.host.data(), v.data(), o.host.size());  // (memcpy of null is undefined)
  int i = 0;
  for (int64_t d : dims) o.dims[i++] = d;
  return o;
}
template <class T>
Operand raw(const std::vector<T>& v, uint32_t dtype, std::initializer_list<int64_t> dims) {
  Operand o;
  o.dtype = dtype;
  o.host.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(o.host.data(), v.data(), o.host.size());
  int i = 0;
  for (int64_t d : dims) o.dims[i++] = d;
  return o;
}
template <class T>
Operand pod(const T& v) {
  Operand o;
  o.dtype = FR_U8;
  o.host.resize(sizeof(T));
  std::memcpy(o.host.data(), &v, sizeof(T));
  o.dims[3] = sizeof(T);
  return o;
}
template <class P>
Bytes params_of(const P& p) {
  Bytes b(sizeof(P));
  std::memcpy(b.data(), &p, sizeof(P));
  return b;
}
std::vector<float> floats(const Bytes& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}
std::vector<float> random(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}
double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() < ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i])) return INFINITY;
    num = std::max(num, std::fabs(got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / std::max(den, 1e-30);
}

FrStepScalars scalars(int32_t step) {
  FrStepScalars s{};
  s.lr = 0.01f;
  s.loss_scale = 1.0f;
  s.step = step;
  s.updates = step;  // no skipped steps
  s.seed_lo = 1234;
  s.seed_hi = 5;
  return s;
}

// x rounded to bf16 (nearest even), as the value a bf16 holds, and the bf16 bits of a downloaded buffer.
float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}
std::vector<float> bf16_values(const Bytes& b) {
  std::vector<float> v(b.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(b[2 * i] | (b[2 * i + 1] << 8)) << 16;
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

constexpr int64_t M = 37, K = 53, N = 29;
}  // namespace

bool make_case(const std::string& op, uint32_t seed, OpCase* c) {
  std::mt19937 rng(seed);
  *c = OpCase{};
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
    const size_t n = 4096 + 17;
    const auto w = random(rng, n), g = random(rng, n), m = random(rng, n), v = random(rng, n, 0.01f, 1.0f);
    const FrStepScalars s = scalars(3);
    if (op == FR_OP_SGD_UPDATE) {
      c->rin = {f32(g, {1, 1, 1, static_cast<int64_t>(n)}), pod(s)};
      c->rout = {f32(w, {1, 1, 1, static_cast<int64_t>(n)}), f32(m, {1, 1, 1, static_cast<int64_t>(n)})};
      c->params = params_of(FrSgdParams{0.9f, 5e-4f, 1, 0});
      c->error = [=](const auto&, const auto& rout) {
        ref::SgdState st{widen(w), widen(m), true};
        ref::sgd_step(st, widen(g), s.lr, ref::SgdConfig{0.9, 5e-4, true});
        return std::max(rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.buf));
      };
    } else {
      c->rin = {f32(g, {1, 1, 1, static_cast<int64_t>(n)}), pod(s)};
      c->rout = {f32(w, {1, 1, 1, static_cast<int64_t>(n)}), f32(m, {1, 1, 1, static_cast<int64_t>(n)}),
                 f32(v, {1, 1, 1, static_cast<int64_t>(n)})};
      c->params = params_of(FrAdamParams{0.9f, 0.999f, 1e-8f, 1e-2f, 1, 0});
      c->error = [=](const auto&, const auto& rout) {
        ref::AdamState st{widen(w), widen(m), widen(v), s.step};
        ref::adam_step(st, widen(g), s.lr, ref::AdamConfig{0.9, 0.999, 1e-8, 1e-2, true});
        return std::max(
            {rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.m), rel_err(floats(rout[2]), st.v)});
      };
    }
    return true;
  }
  return false;
}

// An input-gradient epilogue's outputs (ops.h): dx (x's shape, poisoned) and its two gradient sums.
std::vector<Operand> epilogue_outputs(const ref::ConvShape& sh) {
  return {f32(std::vector<float>(sh.x_size(), NAN), {sh.n, sh.h, sh.w, sh.c}),
          f32(std::vector<float>(2 * sh.c, NAN), {1, 1, 1, 2 * sh.c})};
}

// The error of an input-gradient epilogue against the reference: dx = at(i, the plain input gradient's value)
// and the sums (sum dx, sum dx (bx - mean)) per channel of that dx, in double.
template <class At>
double epilogue_error(const std::vector<Bytes>& out, std::vector<double> dx, const std::vector<float>& bx,
                      const std::vector<float>& mean, int64_t c, At at) {
  const size_t nc = static_cast<size_t>(c);
  std::vector<double> sums(2 * nc, 0.0);
  for (size_t i = 0; i < dx.size(); ++i) {
    const size_t k = i % nc;
    dx[i] = at(i, dx[i]);
    sums[k] += dx[i], sums[nc + k] += dx[i] * (bx[i] - static_cast<double>(mean[k]));
  }
  return std::max(rel_err(floats(out[0]), dx), rel_err(floats(out[1]), sums));
}

namespace {
// A batchnorm's gamma, beta, saved mean and invstd over c channels, and its prologue's map of x:
// relu(fma(x, scale, shift)) as ops.h defines it, in float.
struct BnOperands {
  std::vector<float> g, b, mean, invstd;
  BnOperands(std::mt19937& rng, int64_t c)
      : g(random(rng, static_cast<size_t>(c), 0.5f, 1.5f)),
        b(random(rng, static_cast<size_t>(c))),
        mean(random(rng, static_cast<size_t>(c))),
        invstd(random(rng, static_cast<size_t>(c), 0.5f, 2.0f)) {}
  std::vector<float> applied(const std::vector<float>& x) const {
    std::vector<float> a(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = i % g.size();
      const float scale = g[k] * invstd[k], shift = std::fma(-mean[k], scale, b[k]);
      a[i] = std::max(0.0f, std::fma(x[i], scale, shift));
    }
    return a;
  }
  std::vector<Operand> operands() const {
    const int64_t c = static_cast<int64_t>(g.size());
    return {f32(g, {1, 1, 1, c}), f32(b, {1, 1, 1, c}), f32(mean, {1, 1, 1, c}), f32(invstd, {1, 1, 1, c})};
  }
};
}  // namespace

std::vector<std::pair<std::string, OpCase>> make_variant_cases(const std::string& op, uint32_t seed) {
  std::vector<std::pair<std::string, OpCase>> cases;
  std::mt19937 rng(seed + 1000u);
  if (op == FR_OP_CONV2D) {  // no bias, the sums of y as a second output
    const ref::ConvShape sh{3, 11, 10, 6, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1};
    const FrConvParams cp{3, 3, 2, 2, 1, 1, 1, 1, 1, 0};
    const auto x = random(rng, sh.x_size()), w = random(rng, sh.w_size(), -0.5f, 0.5f);
    OpCase c;
    c.in = {f32(x, {sh.n, sh.h, sh.w, sh.c}), f32(w, {sh.k, sh.r, sh.s, sh.c})};
    c.out = {f32(std::vector<float>(sh.y_size(), NAN), {sh.n, sh.p(), sh.q(), sh.k}),
             f32(std::vector<float>(2 * sh.k, NAN), {1, 1, 1, 2 * sh.k})};
    c.params = params_of(cp);
    c.error = [=](const auto& out, const auto&) {
      const auto y = ref::conv2d_forward(widen(x), widen(w), std::vector<double>(sh.k, 0.0), sh);
      return std::max(rel_err(floats(out[0]), y), rel_err(floats(out[1]), ref::channel_sums(y, sh.k)));
    };
    c.requires_flags = FR_KERNEL_SUMS_OPERANDS;
    cases.emplace_back("sums output", std::move(c));
    // a batchnorm prologue: x is the batchnorm's input; the applied map relu(fma(x, scale, shift)) comes
    // second (the reference computes it as ops.h defines it, in float), the sums third
    const BnOperands bn(rng, sh.c);
    const std::vector<float> applied = bn.applied(x);
    OpCase p;
    p.in = {f32(x, {sh.n, sh.h, sh.w, sh.c}), f32(w, {sh.k, sh.r, sh.s, sh.c})};
    for (const Operand& o : bn.operands()) p.in.push_back(o);
    p.out = {f32(std::vector<float>(sh.y_size(), NAN), {sh.n, sh.p(), sh.q(), sh.k}),
             f32(std::vector<float>(x.size(), NAN), {sh.n, sh.h, sh.w, sh.c}),
             f32(std::vector<float>(2 * sh.k, NAN), {1, 1, 1, 2 * sh.k})};
    p.params = params_of(cp);
    p.requires_flags = FR_KERNEL_CONV_PROLOGUE | FR_KERNEL_SUMS_OPERANDS;
    p.error = [=](const auto& out, const auto&) {
      const auto y = ref::conv2d_forward(widen(applied), widen(w), std::vector<double>(sh.k, 0.0), sh);
      return std::max({rel_err(floats(out[0]), y), rel_err(floats(out[1]), widen(applied)),
                       rel_err(floats(out[2]), ref::channel_sums(y, sh.k))});
    };
    cases.emplace_back("batchnorm prologue", std::move(p));
  }
  if (op == FR_OP_CONV2D_BACKWARD) {
    // the input gradient's batchnorm epilogue: x is the relu output of a batchnorm whose input is bx; dx is
    // masked by x > 0 and gsums = (sum dx, sum dx (bx - mean)) per channel of the masked dx
    const ref::ConvShape sh{3, 11, 10, 6, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1};
    const FrConvParams cp{3, 3, 2, 2, 1, 1, 1, 1, 1, 0};
    const auto bx = random(rng, sh.x_size(), -2.0f, 2.0f), w = random(rng, sh.w_size(), -0.5f, 0.5f),
               dy = random(rng, sh.y_size());
    const BnOperands bn(rng, sh.c);
    const std::vector<float> x = bn.applied(bx), mean = bn.mean;
    OpCase e;
    e.in = {f32(dy, {sh.n, sh.p(), sh.q(), sh.k}), f32(x, {sh.n, sh.h, sh.w, sh.c}),
            f32(w, {sh.k, sh.r, sh.s, sh.c}), f32(bx, {sh.n, sh.h, sh.w, sh.c})};
    for (const Operand& o : bn.operands()) e.in.push_back(o);
    e.out = epilogue_outputs(sh);
    e.params = params_of(FrConvBackwardParams{cp, 1, 1});
    e.requires_flags = FR_KERNEL_CONV_PROLOGUE;
    e.error = [=](const auto& out, const auto&) {
      return epilogue_error(out, ref::conv2d_backward(widen(dy), widen(x), widen(w), sh).dx, bx, mean, sh.c,
                            [&](size_t i, double v) { return x[i] > 0.0f ? v : 0.0; });
    };
    cases.emplace_back("batchnorm gradient epilogue", std::move(e));
    // the input gradient's join epilogue: x is a relu's output that one more layer reads, whose gradient part
    // is part; dx = (the input gradient + part) where x > 0, else 0, and gsums the sums of a batchnorm (input
    // bx2, saved mean mean2) over that dx (ops.h)
    const auto part = random(rng, sh.x_size()), bx2 = random(rng, sh.x_size(), -2.0f, 2.0f);
    const BnOperands jbn(rng, sh.c);
    OpCase j;
    j.in = {f32(dy, {sh.n, sh.p(), sh.q(), sh.k}), f32(x, {sh.n, sh.h, sh.w, sh.c}),
            f32(w, {sh.k, sh.r, sh.s, sh.c}),      f32(part, {sh.n, sh.h, sh.w, sh.c}),
            f32(bx2, {sh.n, sh.h, sh.w, sh.c}),    f32(jbn.mean, {1, 1, 1, sh.c})};
    j.out = epilogue_outputs(sh);
    j.params = params_of(FrConvBackwardParams{cp, 1, 1});
    j.requires_flags = FR_KERNEL_CONV_JOIN_EPILOGUE;
    j.error = [=](const auto& out, const auto&) {
      return epilogue_error(out, ref::conv2d_backward(widen(dy), widen(x), widen(w), sh).dx, bx2, jbn.mean,
                            sh.c, [&](size_t i, double v) { return x[i] > 0.0f ? v + part[i] : 0.0; });
    };
    cases.emplace_back("join epilogue", std::move(j));
    // the weight gradient's batchnorm prologue: dy is the premasked output gradient g of a batchnorm whose
    // input is this conv's output y; the weight gradient is the plain one of that batchnorm's dx, a (g - b -
    // (y - mean) k), from gamma, the saved statistics and gsums (ops.h)
    const auto g = random(rng, sh.y_size()), y = random(rng, sh.y_size(), -2.0f, 2.0f);
    const BnOperands ybn(rng, sh.k);
    std::vector<float> gsums(2 * static_cast<size_t>(sh.k));
    for (float& v : gsums) v = std::uniform_real_distribution<float>(-20.0f, 20.0f)(rng);
    OpCase wp;
    wp.in = {f32(g, {sh.n, sh.p(), sh.q(), sh.k}), f32(bx, {sh.n, sh.h, sh.w, sh.c}),
             f32(w, {sh.k, sh.r, sh.s, sh.c}),     f32(y, {sh.n, sh.p(), sh.q(), sh.k}),
             f32(ybn.g, {1, 1, 1, sh.k}),          f32(ybn.mean, {1, 1, 1, sh.k}),
             f32(ybn.invstd, {1, 1, 1, sh.k}),     f32(gsums, {1, 1, 1, 2 * sh.k})};
    wp.out = {f32(std::vector<float>(sh.w_size(), NAN), {sh.k, sh.r, sh.s, sh.c})};
    wp.params = params_of(FrConvBackwardParams{cp, 0, 2});
    wp.requires_flags = FR_KERNEL_WGRAD_BN_PROLOGUE;
    wp.error = [=](const auto& out, const auto&) {
      const size_t kk = static_cast<size_t>(sh.k);
      const double n = static_cast<double>(sh.y_size() / sh.k);
      std::vector<double> dx_bn(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        const size_t k = i % kk;
        const double is = ybn.invstd[k], a = ybn.g[k] * is, b = gsums[k] / n,
                     kf = gsums[kk + k] * is * is / n;
        dx_bn[i] = a * (g[i] - b - (y[i] - static_cast<double>(ybn.mean[k])) * kf);
      }
      return rel_err(floats(out[0]), ref::conv2d_backward(dx_bn, widen(bx), widen(w), sh).dw);
    };
    cases.emplace_back("batchnorm gradient prologue of the weight gradient", std::move(wp));
  }
  if (op == FR_OP_BATCHNORM_BACKWARD) {  // the weights-only form: {dgamma, dbeta} from gsums, no dx
    constexpr int64_t kC = 6;
    const auto dy = random(rng, 4 * 5 * kC), x = random(rng, 4 * 5 * kC);
    const BnOperands bn(rng, kC);
    std::vector<float> gsums(2 * kC);
    for (float& v : gsums) v = std::uniform_real_distribution<float>(-20.0f, 20.0f)(rng);
    OpCase c;
    c.in = {f32(dy, {4, 1, 5, kC}),      f32(x, {4, 1, 5, kC}),         f32(bn.g, {1, 1, 1, kC}),
            f32(bn.mean, {1, 1, 1, kC}), f32(bn.invstd, {1, 1, 1, kC}), f32(gsums, {1, 1, 1, 2 * kC})};
    c.out = {f32(std::vector<float>(kC, NAN), {1, 1, 1, kC}),
             f32(std::vector<float>(kC, NAN), {1, 1, 1, kC})};
    c.params = params_of(FrBatchNormParams{1e-5f, 0.1f, 1, 0});
    c.requires_flags = FR_KERNEL_WGRAD_BN_PROLOGUE | FR_KERNEL_SUMS_OPERANDS;
    c.error = [=](const auto& out, const auto&) {
      std::vector<double> dgamma(kC), dbeta(kC);
      for (size_t k = 0; k < static_cast<size_t>(kC); ++k)
        dgamma[k] = gsums[kC + k] * static_cast<double>(bn.invstd[k]), dbeta[k] = gsums[k];
      return std::max(rel_err(floats(out[0]), dgamma), rel_err(floats(out[1]), dbeta));
    };
    cases.emplace_back("weights only", std::move(c));
  }
  if (op == FR_OP_BATCHNORM || op == FR_OP_BATCHNORM_ADD) {
    // Statistics from given f32 sums, deliberately those of 1.5 x + 0.25 and not of x, so a kernel that
    // ignored them and computed its own would fail: y = (x - mean) invstd gamma + beta (+ r, relu for add).
    OpCase c;
    if (!make_case(op, seed, &c)) return cases;
    const bool add = op == FR_OP_BATCHNORM_ADD;
    const int64_t ch = c.in[0].dims[3];
    auto host_floats = [](const Operand& o) {
      std::vector<float> v(o.host.size() / sizeof(float));
      std::memcpy(v.data(), o.host.data(), o.host.size());
      return v;
    };
    const auto x = host_floats(c.in[0]), g = host_floats(c.in[1]), b = host_floats(c.in[2]);
    const auto res = add ? host_floats(c.in[3]) : std::vector<float>{};
    const auto rm = host_floats(c.rout[0]), rv = host_floats(c.rout[1]);
    std::vector<double> shifted(x.size());
    for (size_t i = 0; i < x.size(); ++i) shifted[i] = 1.5 * x[i] + 0.25;
    const auto s = ref::channel_sums(shifted, ch);
    const std::vector<float> sums(s.begin(), s.end());
    c.in.push_back(f32(sums, {1, 1, 1, 2 * ch}));
    const int64_t rows = static_cast<int64_t>(x.size()) / ch;
    c.error = [=](const auto& out, const auto& rout) {
      std::vector<double> m = widen(rm), v = widen(rv);
      auto r =
          ref::batchnorm_train_from_sums(widen(x), widen(g), widen(b), sums, rows, ch, 1e-5, 0.1, &m, &v);
      for (size_t i = 0; i < res.size(); ++i) r.y[i] = std::max(0.0, r.y[i] + res[i]);
      return std::max({rel_err(floats(out[0]), r.y), rel_err(floats(out[1]), r.mean),
                       rel_err(floats(out[2]), r.invstd), rel_err(floats(rout[0]), m),
                       rel_err(floats(rout[1]), v)});
    };
    c.requires_flags = FR_KERNEL_SUMS_OPERANDS;
    cases.emplace_back("sums given", std::move(c));
  }
  if (op == FR_OP_BATCHNORM) {  // the statistics-only form: {save_mean, save_invstd} and the running ones
    OpCase c;
    if (!make_case(op, seed, &c)) return cases;
    auto host_floats = [](const Operand& o) {
      std::vector<float> v(o.host.size() / sizeof(float));
      std::memcpy(v.data(), o.host.data(), o.host.size());
      return v;
    };
    const auto x = host_floats(c.in[0]), g = host_floats(c.in[1]), b = host_floats(c.in[2]);
    const auto rm = host_floats(c.rout[0]), rv = host_floats(c.rout[1]);
    const int64_t ch = c.in[0].dims[3], rows = static_cast<int64_t>(x.size()) / ch;
    c.out.erase(c.out.begin());  // no y
    c.requires_flags = FR_KERNEL_CONV_PROLOGUE;
    c.error = [=](const auto& out, const auto& rout) {
      std::vector<double> m = widen(rm), v = widen(rv);
      const auto r = ref::batchnorm_train(widen(x), widen(g), widen(b), rows, ch, 1e-5, 0.1, &m, &v);
      return std::max({rel_err(floats(out[0]), r.mean), rel_err(floats(out[1]), r.invstd),
                       rel_err(floats(rout[0]), m), rel_err(floats(rout[1]), v)});
    };
    cases.emplace_back("statistics only", std::move(c));
  }
  if (op == FR_OP_NORMALIZE_INPUT) {
    OpCase c;
    if (!make_case(op, seed, &c)) return cases;
    // The batch's labels copied in the same call (how the compiler emits it).
    OpCase l = c;
    std::uniform_int_distribution<int32_t> d(0, 9);
    std::vector<int32_t> labels(5);
    for (auto& v : labels) v = d(rng);
    Operand in_labels;
    in_labels.host.resize(labels.size() * sizeof(int32_t));
    std::memcpy(in_labels.host.data(), labels.data(), in_labels.host.size());
    in_labels.dtype = FR_I32;
    in_labels.dims[0] = 5;
    Operand out_labels = in_labels;
    std::fill(out_labels.host.begin(), out_labels.host.end(), uint8_t{0xff});
    l.in.push_back(in_labels);
    l.out.push_back(out_labels);
    const auto base_error = c.error;
    l.error = [=](const auto& out, const auto& rout) {
      const bool same = out[1].size() == labels.size() * sizeof(int32_t) &&
                        std::memcmp(out[1].data(), labels.data(), out[1].size()) == 0;
      return same ? base_error(out, rout) : 1.0;
    };
    cases.emplace_back("labels copied", std::move(l));
    // x four bytes past an aligned address (word loads, but not 16-byte ones), then one byte; y four bytes
    // (735 values: not a multiple of any vector width).
    OpCase words = c;
    words.in[0].offset = 4;
    words.out[0].offset = 4;
    cases.emplace_back("4-byte aligned operands", std::move(words));
    c.in[0].offset = 1;
    c.out[0].offset = 4;
    cases.emplace_back("unaligned operands", std::move(c));
  }
  return cases;
}

}  // namespace fresco::check
