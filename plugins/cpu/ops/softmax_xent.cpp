// CPU fused softmax cross-entropy (mean over the batch, PyTorch label smoothing) forward and backward:
// loss_i = (1-e)(lse - z_y) + e * mean_c(lse - z_c); dlogits = (softmax - target) / M; also counts top-1
// hits. Per-row work is parallel; the batch sums run in row order (deterministic). Test:
// test_softmax_xent.cpp.
#include <cmath>

#include "cpu_common.h"
#include "fresco/softmax_xent_geometry.hpp"
#include "ops/dense_math.h"

namespace fresco::cpu {

void check_labels(const int32_t* y, int64_t m, int64_t c, const char* op) {
  for (int64_t r = 0; r < m; ++r)
    FR_PLUGIN_CHECK(
        y[r] >= 0 && y[r] < c, FR_ERR_INVALID_ARGUMENT,
        std::string(op) + ": label of row " + std::to_string(r) + " outside [0, " + std::to_string(c) + ")");
}

void softmax_xent_f32(const float* z, const int32_t* y, float* dz, int64_t m, int64_t c, float eps,
                      float scale, float* row_ws, FrBatchResults* out) {
  float* row_loss = row_ws;
  float* row_hit = row_ws + m;
  const float inv_m = scale / static_cast<float>(m);
  parallel_chunks(m, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* zr = z + r * c;
      const int32_t label = y[r];
      float mx = zr[0];
      int64_t arg = 0;
      for (int64_t j = 1; j < c; ++j)
        if (zr[j] > mx) mx = zr[j], arg = j;
      double sum = 0.0, zsum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(zr[j] - mx)), zsum += zr[j];
      const double lse = std::log(sum) + mx;
      const double nll = lse - zr[label];
      const double smooth = lse - zsum / static_cast<double>(c);
      row_loss[r] = static_cast<float>((1.0 - eps) * nll + eps * smooth);
      row_hit[r] = arg == label ? 1.0f : 0.0f;
      if (dz) {
        float* dr = dz + r * c;
        const float off = eps / static_cast<float>(c);
        for (int64_t j = 0; j < c; ++j) {
          const float prob = static_cast<float>(std::exp(static_cast<double>(zr[j]) - lse));
          dr[j] = (prob - off - (j == label ? 1.0f - eps : 0.0f)) * inv_m;
        }
      }
    }
  });
  double loss = 0.0, hits = 0.0;
  for (int64_t r = 0; r < m; ++r) loss += row_loss[r], hits += row_hit[r];
  out->loss = static_cast<float>(loss / static_cast<double>(m));
  out->correct = static_cast<float>(hits);
  out->samples = static_cast<float>(m);
}

FR_CPU_KERNEL_PREPARE(softmax_xent) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 0, 0, 1, "softmax_xent");
    *state = nullptr;
    *workspace_bytes = sdk::xent_workspace_bytes(call);
  });
}

FR_CPU_KERNEL_RUN(softmax_xent) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrSoftmaxXentParams>(call);
    const auto& lt = call->in[0];
    const sdk::XentShape xs = sdk::xent_shape(call);
    const int64_t m = xs.m, c = xs.c;
    const float* z = sdk::data<float>(lt);
    const int32_t* y = sdk::data<int32_t>(call->in[1]);
    float* dz = p.write_grad ? sdk::data<float>(call->out[0]) : nullptr;
    // With the step scalars as rin (dynamic loss scaling) the gradient is multiplied by the loss scale.
    const float scale = xs.ls ? xs.ls->loss_scale : 1.0f;
    check_labels(y, m, c, "softmax_xent");
    softmax_xent_f32(z, y, dz, m, c, p.label_smoothing, scale, static_cast<float*>(call->workspace),
                     static_cast<FrBatchResults*>(call->rout[0].data));
  });
}

}  // namespace fresco::cpu
