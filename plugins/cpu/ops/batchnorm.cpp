// CPU batchnorm forward (per channel = last dim of an NHWC map seen as [rows, C]), PyTorch BatchNorm2d:
// training uses the batch mean and biased variance (two passes, double partial sums per fixed row chunk,
// combined in chunk order, so results do not depend on the thread count) and moves running_mean/var by
// momentum with the unbiased variance; inference uses the running statistics. With params.relu the output is
// max(y, 0) (a fused relu). batchnorm_forward also serves batchnorm_add (ops/batchnorm_add.cpp), which adds a
// residual before the relu. Given the sums of x (a fourth input, batchnorm_add's fifth; ops.h), training
// skips both passes and takes the mean and variance from them (fr_bn_stats_from_sums). The training
// statistics-only form (two outputs {save_mean, save_invstd}, ops.h: a conv2d's prologue applies the
// batchnorm) stops before the normalising pass. Test:
// test_batchnorm.cpp.
#include <algorithm>
#include <cmath>

#include "cpu_common.h"
#include "fresco/batchnorm_rules.h"
#include "fresco/conv_prologue.hpp"
#include "fresco/conv_stats_checks.hpp"
#include "ops/batchnorm_chunks.h"
#include "ops/batchnorm_forward.h"

namespace fresco::cpu {

namespace {

// Workspace: training: double partial[chunks * C], then float mean[C], scale[C]; inference: float shift[C],
// scale[C].
uint64_t bn_workspace(const BnShape& s, bool training) {
  const auto c = static_cast<uint64_t>(s.c);
  return (training ? static_cast<uint64_t>(s.chunks) * c * sizeof(double) : 0) + 2 * c * sizeof(float);
}

void check_vec(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements, expected C = " + std::to_string(c));
}

void check_range(const FrRange& r, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(r.bytes >= static_cast<uint64_t>(c) * sizeof(float), FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm: range ") + what + " holds fewer than C floats");
}

void check_arity(const FrCall* call, const FrBatchNormParams& p) {
  if (p.training) {
    sdk::expect_arity(call, 3, 2, 0, 2, "batchnorm (training)");
    sdk::bn_statistics_index(call);  // checks the outputs
  } else {
    sdk::expect_arity(call, 5, 1, 0, 0, "batchnorm (inference)");
  }
}

}  // namespace

uint64_t batchnorm_workspace(const FrCall* call) {
  const auto& p = sdk::params<FrBatchNormParams>(call);
  check_arity(call, p);
  return bn_workspace(bn_shape(call->in[0], "batchnorm"), p.training != 0);
}

FR_CPU_KERNEL_PREPARE(batchnorm) {
  return sdk::guard([&] {
    *state = nullptr;
    *workspace_bytes = batchnorm_workspace(call);
  });
}

FR_CPU_KERNEL_RUN(batchnorm) {
  return sdk::guard([&] { batchnorm_forward(call, nullptr, 3, "batchnorm"); });
}

void batchnorm_forward(const FrCall* call, const float* residual, uint32_t sums_index, const char* op) {
  const auto& p = sdk::params<FrBatchNormParams>(call);
  check_arity(call, p);
  const BnShape s = bn_shape(call->in[0], "batchnorm");
  const int64_t rows = s.rows, c = s.c;
  const uint32_t stats = p.training ? sdk::bn_statistics_index(call) : 1;  // where save_mean, save_invstd are
  const bool stats_only = stats == 0;
  FR_PLUGIN_CHECK(!stats_only || !residual, FR_ERR_INVALID_ARGUMENT, "batchnorm_add: y is required");
  FR_PLUGIN_CHECK(stats_only || sdk::numel(call->out[0]) == rows * c, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm: x and y sizes differ");
  FR_PLUGIN_CHECK(p.eps >= 0.0f && std::isfinite(p.eps), FR_ERR_INVALID_ARGUMENT, "batchnorm: bad eps");
  check_vec(call->in[1], c, "gamma");
  check_vec(call->in[2], c, "beta");
  FR_PLUGIN_CHECK(call->workspace_bytes >= bn_workspace(s, p.training != 0), FR_ERR_INVALID_ARGUMENT,
                  "batchnorm: workspace too small");
  const float* x = sdk::data<float>(call->in[0]);
  const float* gamma = sdk::data<float>(call->in[1]);
  const float* beta = sdk::data<float>(call->in[2]);
  float* y = stats_only ? nullptr : sdk::data<float>(call->out[0]);
  float* shift = nullptr;  // per channel: y = (x - shift) * scale + beta
  float* scale = nullptr;

  if (p.training) {
    check_vec(call->out[stats], c, "save_mean");
    check_vec(call->out[stats + 1], c, "save_invstd");
    check_range(call->rout[0], c, "running_mean");
    check_range(call->rout[1], c, "running_var");
    FR_PLUGIN_CHECK(rows >= 2, FR_ERR_INVALID_ARGUMENT,
                    "batchnorm: training needs more than one value per channel");
    double* part = static_cast<double*>(call->workspace);
    shift = reinterpret_cast<float*>(part + s.chunks * c);
    scale = shift + c;
    float* save_mean = sdk::data<float>(call->out[stats]);
    float* save_invstd = sdk::data<float>(call->out[stats + 1]);
    float* run_mean = sdk::data<float>(call->rout[0]);
    float* run_var = sdk::data<float>(call->rout[1]);
    const double n = static_cast<double>(rows);
    const float* sums = sdk::bn_sums_input(call, sums_index, c, op);
    double* var = part;  // the biased variance per channel, over the first C partials once they are summed
    if (sums) {
      for (int64_t k = 0; k < c; ++k) fr_bn_stats_from_sums(sums[k], sums[c + k], n, &save_mean[k], &var[k]);
    } else {
      // Pass 1: per-chunk channel sums, combined in chunk order.
      parallel_chunks(rows, s.grain, [&](int64_t a, int64_t b) {
        double* acc = part + (a / s.grain) * c;
        std::fill(acc, acc + c, 0.0);
        for (int64_t i = a; i < b; ++i) {
          const float* xr = x + i * c;
          for (int64_t k = 0; k < c; ++k) acc[k] += xr[k];
        }
      });
      for (int64_t k = 0; k < c; ++k) {
        double sum = 0.0;
        for (int64_t j = 0; j < s.chunks; ++j) sum += part[j * c + k];
        save_mean[k] = static_cast<float>(sum / n);  // kept in float: the backward sees the same value
      }
      // Pass 2: centred sums of squares around the (float) mean.
      parallel_chunks(rows, s.grain, [&](int64_t a, int64_t b) {
        double* acc = part + (a / s.grain) * c;
        std::fill(acc, acc + c, 0.0);
        for (int64_t i = a; i < b; ++i) {
          const float* xr = x + i * c;
          for (int64_t k = 0; k < c; ++k) {
            const double d = static_cast<double>(xr[k]) - save_mean[k];
            acc[k] += d * d;
          }
        }
      });
      for (int64_t k = 0; k < c; ++k) {  // part[k] is read (chunk 0) before it is overwritten
        double ss = 0.0;
        for (int64_t j = 0; j < s.chunks; ++j) ss += part[j * c + k];
        var[k] = ss / n;
      }
    }
    const double mom = p.momentum;
    for (int64_t k = 0; k < c; ++k) {
      const double invstd = 1.0 / std::sqrt(var[k] + static_cast<double>(p.eps));
      save_invstd[k] = static_cast<float>(invstd);
      shift[k] = save_mean[k];
      scale[k] = static_cast<float>(gamma[k] * invstd);
      run_mean[k] = static_cast<float>((1.0 - mom) * run_mean[k] + mom * save_mean[k]);
      run_var[k] = static_cast<float>((1.0 - mom) * run_var[k] + mom * var[k] * n / (n - 1.0));
    }
  } else {
    check_vec(call->in[3], c, "running_mean");
    check_vec(call->in[4], c, "running_var");
    const float* rm = sdk::data<float>(call->in[3]);
    const float* rv = sdk::data<float>(call->in[4]);
    shift = static_cast<float*>(call->workspace);
    scale = shift + c;
    for (int64_t k = 0; k < c; ++k) {
      shift[k] = rm[k];
      scale[k] = fr_bn_fold_scale(gamma[k], rv[k], p.eps);
    }
  }
  if (!y) return;  // statistics only
  // Normalise (then the residual and the fused relu): element-wise, so y may alias x.
  const bool relu = p.relu != 0;
  parallel_chunks(rows, s.grain, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const float* xr = x + i * c;
      const float* rr = residual ? residual + i * c : nullptr;
      float* yr = y + i * c;
      for (int64_t k = 0; k < c; ++k) {
        float v = (xr[k] - shift[k]) * scale[k] + beta[k];
        if (rr) v += rr[k];
        yr[k] = relu ? (v > 0.0f ? v : 0.0f) : v;
      }
    }
  });
}

}  // namespace fresco::cpu
