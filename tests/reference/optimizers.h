// Reference optimizers in double precision, transcribed from PyTorch's single-tensor (for-loop)
// implementations: torch.optim.SGD (dampening 0; the momentum buffer is a copy of the first step's d_p),
// LARS (facebookresearch's Barlow Twins form) and torch.optim.Adam / AdamW (bias correction with the step
// count t = 1, 2, ...; Adam adds L2 decay to the gradient, AdamW decays the weight by lr * wd before the
// moments). Used by test_optimizers.cpp and test_simple_task.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace fresco::ref {

struct SgdConfig {
  double momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};

struct SgdState {
  std::vector<double> w, buf;
  bool has_buf = false;  // PyTorch: momentum_buffer is None before the first step
};

inline void sgd_step(SgdState& s, const std::vector<double>& grad, double lr, const SgdConfig& c) {
  for (size_t i = 0; i < s.w.size(); ++i) {
    double d = grad[i];
    if (c.weight_decay != 0.0) d += c.weight_decay * s.w[i];
    if (c.momentum != 0.0) {
      if (!s.has_buf) {
        if (s.buf.size() != s.w.size()) s.buf.assign(s.w.size(), 0.0);
        s.buf[i] = d;
      } else {
        s.buf[i] = c.momentum * s.buf[i] + d;
      }
      d = c.nesterov ? d + c.momentum * s.buf[i] : s.buf[i];
    }
    s.w[i] -= lr * d;
  }
  if (c.momentum != 0.0) s.has_buf = true;
}

// LARS as the Barlow Twins / VICReg PyTorch LARS (ops.h, lars_update): d = g + wd w; q = eta ||w|| / ||d||
// (1 where a norm is 0); buf = momentum buf + q d (zeros at first); w -= lr buf.
struct LarsConfig {
  double momentum = 0.9, weight_decay = 0.0, eta = 1e-3;
};
inline void lars_step(SgdState& s, const std::vector<double>& grad, double lr, const LarsConfig& c) {
  if (s.buf.size() != s.w.size()) s.buf.assign(s.w.size(), 0.0);
  std::vector<double> d(s.w.size());
  double wn = 0.0, dn = 0.0;
  for (size_t i = 0; i < s.w.size(); ++i) {
    d[i] = grad[i] + c.weight_decay * s.w[i];
    wn += s.w[i] * s.w[i], dn += d[i] * d[i];
  }
  const double q = wn > 0.0 && dn > 0.0 ? c.eta * std::sqrt(wn) / std::sqrt(dn) : 1.0;
  for (size_t i = 0; i < s.w.size(); ++i) {
    s.buf[i] = c.momentum * s.buf[i] + q * d[i];
    s.w[i] -= lr * s.buf[i];
  }
  s.has_buf = true;
}

struct AdamConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // false: Adam (L2 into the gradient); true: AdamW
};

struct AdamState {
  std::vector<double> w, m, v;
  int64_t step = 0;  // steps taken so far
};

inline void adam_step(AdamState& s, const std::vector<double>& grad, double lr, const AdamConfig& c) {
  s.step += 1;
  const double t = static_cast<double>(s.step);
  const double bc1 = 1.0 - std::pow(c.beta1, t), bc2 = 1.0 - std::pow(c.beta2, t);
  for (size_t i = 0; i < s.w.size(); ++i) {
    double g = grad[i];
    if (c.weight_decay != 0.0) {
      if (c.decoupled)
        s.w[i] *= 1.0 - lr * c.weight_decay;
      else
        g += c.weight_decay * s.w[i];
    }
    s.m[i] = c.beta1 * s.m[i] + (1.0 - c.beta1) * g;
    s.v[i] = c.beta2 * s.v[i] + (1.0 - c.beta2) * g * g;
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + c.eps;
    s.w[i] -= lr / bc1 * s.m[i] / denom;
  }
}

}  // namespace fresco::ref
