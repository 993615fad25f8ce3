// fresco-plugin-check's cases of the ops' optional operand forms (op_cases.h, make_variant_cases).
#include "cases/case_helpers.h"
#include "cases/optimizer_case.h"
#include "reference/batchnorm.h"
#include "reference/conv2d.h"
#include "reference/normalize_input.h"
#include "reference/optimizers.h"

namespace fresco::check {

namespace {
// A per-step momentum table (one-cycle's form): step 3 takes 0.875.
const std::vector<float> kMomentumTable = {0.95f, 0.9f, 0.85f, 0.875f, 0.8f};

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

// A batchnorm's gamma, beta, saved mean and invstd over c channels, and its prologue's map of x:
// relu(fma(x, scale, shift)) as ops.h defines it, in float (the join prologue: r added before the relu).
struct BnOperands {
  std::vector<float> g, b, mean, invstd;
  BnOperands(std::mt19937& rng, int64_t c)
      : g(random(rng, static_cast<size_t>(c), 0.5f, 1.5f)),
        b(random(rng, static_cast<size_t>(c))),
        mean(random(rng, static_cast<size_t>(c))),
        invstd(random(rng, static_cast<size_t>(c), 0.5f, 2.0f)) {}
  std::vector<float> applied(const std::vector<float>& x, const std::vector<float>* r = nullptr) const {
    std::vector<float> a(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = i % g.size();
      const float scale = g[k] * invstd[k], shift = std::fma(-mean[k], scale, b[k]);
      const float v = std::fma(x[i], scale, shift);
      a[i] = std::max(0.0f, r ? v + (*r)[i] : v);
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
    // the join prologue: a fifth prologue operand r, the join's other branch, added before the relu
    const auto r = random(rng, sh.x_size(), -1.5f, 1.5f);
    const std::vector<float> joined = bn.applied(x, &r);
    OpCase jp;
    jp.in = {f32(x, {sh.n, sh.h, sh.w, sh.c}), f32(w, {sh.k, sh.r, sh.s, sh.c})};
    for (const Operand& o : bn.operands()) jp.in.push_back(o);
    jp.in.push_back(f32(r, {sh.n, sh.h, sh.w, sh.c}));
    jp.out = {f32(std::vector<float>(sh.y_size(), NAN), {sh.n, sh.p(), sh.q(), sh.k}),
              f32(std::vector<float>(x.size(), NAN), {sh.n, sh.h, sh.w, sh.c})};
    jp.params = params_of(cp);
    jp.requires_flags = FR_KERNEL_CONV_PROLOGUE | FR_KERNEL_CONV_JOIN_PROLOGUE;
    jp.error = [=](const auto& out, const auto&) {
      const auto y = ref::conv2d_forward(widen(joined), widen(w), std::vector<double>(sh.k, 0.0), sh);
      return std::max(rel_err(floats(out[0]), y), rel_err(floats(out[1]), widen(joined)));
    };
    cases.emplace_back("join prologue", std::move(jp));
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
    // the compact input gradient of a strided 1x1 conv: dx at dy's positions only, the full-size input
    // gradient's values at x's positions (stride_h p, stride_w q) (ops.h)
    const ref::ConvShape sc{3, 9, 10, 6, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1};
    const FrConvParams cc{1, 1, 2, 2, 0, 0, 1, 1, 1, 0};
    const auto cdy = random(rng, sc.y_size()), cx = random(rng, sc.x_size()), cw = random(rng, sc.w_size());
    OpCase cd;
    cd.in = {f32(cdy, {sc.n, sc.p(), sc.q(), sc.k}), f32(cx, {sc.n, sc.h, sc.w, sc.c}),
             f32(cw, {sc.k, 1, 1, sc.c})};
    cd.out = {f32(std::vector<float>(sc.n * sc.p() * sc.q() * sc.c, NAN), {sc.n, sc.p(), sc.q(), sc.c})};
    cd.params = params_of(FrConvBackwardParams{cc, 1, 1});
    cd.requires_flags = FR_KERNEL_COMPACT_GRAD;
    cd.error = [=](const auto& out, const auto&) {
      const std::vector<double> full = ref::conv2d_backward(widen(cdy), widen(cx), widen(cw), sc).dx;
      std::vector<double> want;
      for (int64_t i = 0; i < sc.n; ++i)
        for (int64_t r = 0; r < sc.p(); ++r)
          for (int64_t q = 0; q < sc.q(); ++q)
            for (int64_t k = 0; k < sc.c; ++k)
              want.push_back(full[static_cast<size_t>(((i * sc.h + 2 * r) * sc.w + 2 * q) * sc.c + k)]);
      return rel_err(floats(out[0]), want);
    };
    cases.emplace_back("compact input gradient", std::move(cd));
  }
  if (op == FR_OP_ADD_RELU_BACKWARD) {  // a compact b: (a + b at the strided positions, else + 0) * (y > 0)
    const int64_t n = 3, h = 9, w = 10, c = 6, p = 5, q = 5;
    const auto a = random(rng, n * h * w * c), b = random(rng, n * p * q * c), y = random(rng, n * h * w * c);
    OpCase cr;
    cr.in = {f32(a, {n, h, w, c}), f32(b, {n, p, q, c}), f32(y, {n, h, w, c})};
    cr.out = {f32(std::vector<float>(n * h * w * c, NAN), {n, h, w, c})};
    cr.params = params_of(FrAddReluBackwardParams{2, 2});
    cr.tolerance = 1e-6;
    cr.requires_flags = FR_KERNEL_COMPACT_GRAD;
    cr.error = [=](const auto& out, const auto&) {
      std::vector<double> want(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        const int64_t r = static_cast<int64_t>(i) / c, k = static_cast<int64_t>(i) % c;
        const int64_t ww = r % w, hh = (r / w) % h, img = r / (w * h);
        const double part = hh % 2 == 0 && ww % 2 == 0
                                ? b[static_cast<size_t>(((img * p + hh / 2) * q + ww / 2) * c + k)]
                                : 0.0;
        want[i] = y[i] > 0.0f ? a[i] + part : 0.0;
      }
      return rel_err(floats(out[0]), want);
    };
    cases.emplace_back("compact second part", std::move(cr));
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
  if (op == FR_OP_BATCHNORM_ADD) {  // the subsampled output: y's even rows and columns as a fourth output
    OpCase c;
    if (!make_case(op, seed, &c)) return cases;
    const int64_t* d = c.in[0].dims;
    const int64_t n = d[0], h = d[1], w = d[2], ch = d[3], p = (h + 1) / 2, q = (w + 1) / 2;
    c.out.push_back(f32(std::vector<float>(n * p * q * ch, NAN), {n, p, q, ch}));
    const auto plain = c.error;
    c.requires_flags = FR_KERNEL_SUBSAMPLED_OUTPUT;
    c.error = [=](const auto& out, const auto& rout) {
      const std::vector<float> y = floats(out[0]);
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < p; ++r)
          for (int64_t j = 0; j < q; ++j)
            for (int64_t k = 0; k < ch; ++k)
              want.push_back(y[static_cast<size_t>(((i * h + 2 * r) * w + 2 * j) * ch + k)]);
      return std::max(plain(out, rout), rel_err(floats(out[3]), want));
    };
    cases.emplace_back("subsampled output", std::move(c));
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
  if (op == FR_OP_LARS_UPDATE) {  // momentum per step
    const size_t n = 4096 + 17;
    const auto w = random(rng, n), g = random(rng, n), m = random(rng, n);
    const FrStepScalars s = scalars(3);
    const int64_t len = static_cast<int64_t>(n);
    OpCase c;
    c.requires_flags = FR_KERNEL_STEP_MOMENTUM;
    c.rin = {f32(g, {1, 1, 1, len}), pod(s), f32(kMomentumTable, {1, 1, 1, 5})};
    c.rout = {f32(w, {1, 1, 1, len}), f32(m, {1, 1, 1, len})};
    c.params = params_of(FrLarsParams{0.5f, 5e-4f, 0.02f, 0});
    c.error = [=](const auto&, const auto& rout) {
      ref::SgdState st{widen(w), widen(m), true};
      ref::lars_step(st, widen(g), s.lr, ref::LarsConfig{kMomentumTable[3], 5e-4, 0.02});
      return std::max(rel_err(floats(rout[0]), st.w), rel_err(floats(rout[1]), st.buf));
    };
    cases.emplace_back("per-step momentum table", std::move(c));
  }
  if (op == FR_OP_SGD_UPDATE || op == FR_OP_ADAM_UPDATE) {
    {  // momentum (Adam: beta1) per step; params.momentum only says that a buffer exists
      const auto g = random(rng, 4096 + 17);
      const FrStepScalars s = scalars(3);
      OpCase c;
      c.requires_flags = FR_KERNEL_STEP_MOMENTUM;
      c.rin = {f32(g, {1, 1, 1, static_cast<int64_t>(g.size())}), pod(s), f32(kMomentumTable, {1, 1, 1, 5})};
      optimizer_case(op, rng, widen(g), s, 0.5f, kMomentumTable[3], &c);
      cases.emplace_back("per-step momentum table", std::move(c));
    }
    {  // bf16 gradients, unscaled as read: the update sees bf16 / 1024, exact
      const std::vector<float> a = random(rng, 4096 + 17, -1024.0f, 1024.0f);
      std::vector<uint16_t> g16(a.size());
      std::vector<double> g(a.size());
      for (size_t i = 0; i < a.size(); ++i) g16[i] = bf16_bits(a[i]), g[i] = bf16_round(a[i]) / 1024.0;
      FrStepScalars s = scalars(3);
      s.loss_scale = 1024.0f;
      OpCase c;
      c.requires_flags = FR_KERNEL_HALF_GRADS;
      c.rin = {raw(g16, FR_BF16, {1, 1, 1, static_cast<int64_t>(a.size())}), pod(s)};
      optimizer_case(op, rng, g, s, 0.9f, 0.9, &c);
      cases.emplace_back("16-bit gradients", std::move(c));
    }
    {  // the backups: the f32 ranges as they were before the step
      const auto g = random(rng, 4096 + 17);
      const FrStepScalars s = scalars(3);
      OpCase c;
      c.requires_flags = FR_KERNEL_UPDATE_BACKUPS;
      c.rin = {f32(g, {1, 1, 1, static_cast<int64_t>(g.size())}), pod(s)};
      optimizer_case(op, rng, widen(g), s, 0.9f, 0.9, &c, true);
      cases.emplace_back("backups", std::move(c));
    }
  }
  if (op == FR_OP_CHECK_GRADS) {  // f32 gradients: finite ones leave the step, and the loss scale counts
    for (bool overflow : {false, true}) {
      std::vector<float> g = random(rng, 1000, -4.0f, 4.0f);
      FrStepScalars sc = scalars(3);
      sc.loss_scale = overflow ? 1e-10f : 1024.0f;  // 1e30 / 1e-10 is past the largest float
      if (overflow) g[400] = 1e30f;
      OpCase c;
      c.rin = {f32(g, {1, 1, 1, 1000})};
      c.rout = {pod(sc)};
      c.tolerance = 0.0;
      sc.skip_step = overflow ? 1 : 0;
      c.error = scalars_error(sc);
      cases.emplace_back(overflow ? "finite values past the float range once unscaled" : "finite gradients",
                         std::move(c));
    }
  }
  return cases;
}

}  // namespace fresco::check
