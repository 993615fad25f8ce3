// Reference 2-D convolution in double precision, NHWC, weights [K, R, S, C/groups]
// (sdk/include/fresco/ops.h): the direct 7-loop sum y[n,p,q,k] = b[k] + sum_{r,s,c} x[n, p*sh-ph+r*dh,
// q*sw-pw+s*dw, g*C/g+c] w[k,r,s,c] (zero padding), and its gradients by the same loops transposed. Plain and
// obviously correct, not fast. Used by tests/plugins/cpu/test_conv2d.cpp (checked there by finite
// differences) and fresco-plugin-check.
#pragma once

#include <cstdint>
#include <vector>

namespace fresco::ref {

struct ConvShape {
  int64_t n, h, w, c;  // input [N, H, W, C]
  int64_t k, r, s;     // weight [K, R, S, C/groups]
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1, groups = 1;
  int64_t p() const { return (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t q() const { return (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1; }
  int64_t x_size() const { return n * h * w * c; }
  int64_t w_size() const { return k * r * s * (c / groups); }
  int64_t y_size() const { return n * p() * q() * k; }
};

// Calls f(y index, x index, w index) for every (output, tap) pair whose input lies inside the image.
template <class F>
void conv_for_each_term(const ConvShape& sh, F&& f) {
  const int64_t cg = sh.c / sh.groups, kg = sh.k / sh.groups, P = sh.p(), Q = sh.q();
  for (int64_t n = 0; n < sh.n; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t k = 0; k < sh.k; ++k) {
          const int64_t g = k / kg, yi = ((n * P + p) * Q + q) * sh.k + k;
          for (int64_t r = 0; r < sh.r; ++r) {
            const int64_t hh = p * sh.stride_h - sh.pad_h + r * sh.dil_h;
            if (hh < 0 || hh >= sh.h) continue;
            for (int64_t s = 0; s < sh.s; ++s) {
              const int64_t ww = q * sh.stride_w - sh.pad_w + s * sh.dil_w;
              if (ww < 0 || ww >= sh.w) continue;
              for (int64_t c = 0; c < cg; ++c)
                f(static_cast<size_t>(yi),
                  static_cast<size_t>(((n * sh.h + hh) * sh.w + ww) * sh.c + g * cg + c),
                  static_cast<size_t>(((k * sh.r + r) * sh.s + s) * cg + c));
            }
          }
        }
}

// b may be empty (no bias). With |x|, |w|, |b| as inputs this gives sum |terms|, the rounding-error scale.
inline std::vector<double> conv2d_forward(const std::vector<double>& x, const std::vector<double>& w,
                                          const std::vector<double>& b, const ConvShape& sh) {
  std::vector<double> y(static_cast<size_t>(sh.y_size()), 0.0);
  if (!b.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] = b[i % static_cast<size_t>(sh.k)];
  conv_for_each_term(sh, [&](size_t yi, size_t xi, size_t wi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

struct ConvGrads {
  std::vector<double> dw, db, dx;
};

inline ConvGrads conv2d_backward(const std::vector<double>& dy, const std::vector<double>& x,
                                 const std::vector<double>& w, const ConvShape& sh) {
  ConvGrads g;
  g.dw.assign(static_cast<size_t>(sh.w_size()), 0.0);
  g.db.assign(static_cast<size_t>(sh.k), 0.0);
  g.dx.assign(static_cast<size_t>(sh.x_size()), 0.0);
  for (size_t i = 0; i < dy.size(); ++i) g.db[i % static_cast<size_t>(sh.k)] += dy[i];
  conv_for_each_term(sh, [&](size_t yi, size_t xi, size_t wi) {
    g.dw[wi] += dy[yi] * x[xi];
    g.dx[xi] += dy[yi] * w[wi];
  });
  return g;
}

}  // namespace fresco::ref
