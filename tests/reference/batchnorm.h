// Reference BatchNorm2d (per channel of an NHWC map seen as [rows, C]) in double precision, PyTorch
// semantics: training normalises with the batch mean and biased variance and moves the running statistics by
// momentum with the unbiased variance; inference uses the running statistics; backward gives dx, dgamma,
// dbeta. Used by test_batchnorm.cpp (checked there by finite differences) and fresco-plugin-check.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace fresco::ref {

struct BnTrainResult {
  std::vector<double> y, mean, var, invstd;  // var: biased batch variance
};

// Training forward given each channel's batch mean and biased variance: y, invstd, and the running statistics
// (updated in place) moved by momentum with the unbiased variance. x is [rows, C] row-major.
inline BnTrainResult batchnorm_train_with_stats(const std::vector<double>& x,
                                                const std::vector<double>& gamma,
                                                const std::vector<double>& beta, int64_t rows, int64_t c,
                                                std::vector<double> mean, std::vector<double> var, double eps,
                                                double momentum, std::vector<double>* running_mean,
                                                std::vector<double>* running_var) {
  BnTrainResult r;
  const auto C = static_cast<size_t>(c);
  r.y.resize(x.size());
  r.mean = std::move(mean);
  r.var = std::move(var);
  r.invstd.assign(C, 0.0);
  for (size_t ch = 0; ch < C; ++ch) {
    const double invstd = 1.0 / std::sqrt(r.var[ch] + eps);
    for (int64_t i = 0; i < rows; ++i) {
      const size_t k = static_cast<size_t>(i) * C + ch;
      r.y[k] = gamma[ch] * (x[k] - r.mean[ch]) * invstd + beta[ch];
    }
    r.invstd[ch] = invstd;
    if (running_mean) (*running_mean)[ch] = (1.0 - momentum) * (*running_mean)[ch] + momentum * r.mean[ch];
    if (running_var && rows > 1)
      (*running_var)[ch] = (1.0 - momentum) * (*running_var)[ch] +
                           momentum * r.var[ch] * static_cast<double>(rows) / static_cast<double>(rows - 1);
  }
  return r;
}

// x is [rows, C] row-major; running_mean/var are updated in place. Two-pass statistics in double.
inline BnTrainResult batchnorm_train(const std::vector<double>& x, const std::vector<double>& gamma,
                                     const std::vector<double>& beta, int64_t rows, int64_t c, double eps,
                                     double momentum, std::vector<double>* running_mean = nullptr,
                                     std::vector<double>* running_var = nullptr) {
  const auto C = static_cast<size_t>(c);
  std::vector<double> mean(C, 0.0), var(C, 0.0);
  for (size_t ch = 0; ch < C; ++ch) {
    double s = 0.0;
    for (int64_t i = 0; i < rows; ++i) s += x[static_cast<size_t>(i) * C + ch];
    mean[ch] = s / static_cast<double>(rows);
    double v = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const double d = x[static_cast<size_t>(i) * C + ch] - mean[ch];
      v += d * d;
    }
    var[ch] = v / static_cast<double>(rows);
  }
  return batchnorm_train_with_stats(x, gamma, beta, rows, c, std::move(mean), std::move(var), eps, momentum,
                                    running_mean, running_var);
}

// Per-channel sums of v ([rows, C] row-major): s[k] = the sum of v[., k], s[C + k] = the sum of its squares
// (conv2d's sums output and batchnorm's sums input, ops.h).
inline std::vector<double> channel_sums(const std::vector<double>& v, int64_t c) {
  const auto C = static_cast<size_t>(c);
  std::vector<double> s(2 * C, 0.0);
  for (size_t i = 0; i < v.size(); ++i) {
    s[i % C] += v[i];
    s[C + i % C] += v[i] * v[i];
  }
  return s;
}

// Training forward with the statistics taken from f32 sums (ops.h): mean = (float)(sum / rows), biased
// variance max(sumsq / rows - mean^2, 0).
inline BnTrainResult batchnorm_train_from_sums(const std::vector<double>& x, const std::vector<double>& gamma,
                                               const std::vector<double>& beta,
                                               const std::vector<float>& sums, int64_t rows, int64_t c,
                                               double eps, double momentum,
                                               std::vector<double>* running_mean = nullptr,
                                               std::vector<double>* running_var = nullptr) {
  const auto C = static_cast<size_t>(c);
  const auto n = static_cast<double>(rows);
  std::vector<double> mean(C), var(C);
  for (size_t k = 0; k < C; ++k) {
    const float mu = static_cast<float>(static_cast<double>(sums[k]) / n);
    mean[k] = mu;
    var[k] = std::max(static_cast<double>(sums[C + k]) / n - static_cast<double>(mu) * mu, 0.0);
  }
  return batchnorm_train_with_stats(x, gamma, beta, rows, c, std::move(mean), std::move(var), eps, momentum,
                                    running_mean, running_var);
}

inline std::vector<double> batchnorm_inference(const std::vector<double>& x, const std::vector<double>& gamma,
                                               const std::vector<double>& beta,
                                               const std::vector<double>& running_mean,
                                               const std::vector<double>& running_var, int64_t c,
                                               double eps) {
  std::vector<double> y(x.size());
  const auto C = static_cast<size_t>(c);
  for (size_t k = 0; k < x.size(); ++k) {
    const size_t ch = k % C;
    y[k] = gamma[ch] * (x[k] - running_mean[ch]) / std::sqrt(running_var[ch] + eps) + beta[ch];
  }
  return y;
}

struct BnGrads {
  std::vector<double> dx, dgamma, dbeta;
};

// Gradients of the training forward given the saved batch mean and invstd.
inline BnGrads batchnorm_backward(const std::vector<double>& dy, const std::vector<double>& x,
                                  const std::vector<double>& gamma, const std::vector<double>& mean,
                                  const std::vector<double>& invstd, int64_t rows, int64_t c) {
  BnGrads g;
  const auto C = static_cast<size_t>(c);
  g.dx.resize(x.size());
  g.dgamma.assign(C, 0.0);
  g.dbeta.assign(C, 0.0);
  const double n = static_cast<double>(rows);
  for (size_t ch = 0; ch < C; ++ch) {
    for (int64_t i = 0; i < rows; ++i) {
      const size_t k = static_cast<size_t>(i) * C + ch;
      g.dbeta[ch] += dy[k];
      g.dgamma[ch] += dy[k] * (x[k] - mean[ch]) * invstd[ch];
    }
    for (int64_t i = 0; i < rows; ++i) {
      const size_t k = static_cast<size_t>(i) * C + ch;
      const double xhat = (x[k] - mean[ch]) * invstd[ch];
      g.dx[k] = gamma[ch] * invstd[ch] / n * (n * dy[k] - g.dbeta[ch] - xhat * g.dgamma[ch]);
    }
  }
  return g;
}

}  // namespace fresco::ref
