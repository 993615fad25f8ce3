// CPU fused softmax cross-entropy (mean over the batch, PyTorch label smoothing) forward and backward:
// loss_i = (1-e)(lse - z_y) + e * mean_c(lse - z_c); dlogits = (softmax - target) / M; also counts top-1
// hits. Per-row work is parallel; the batch sums run in row order (deterministic). Test:
// test_softmax_xent.cpp.
#include <cmath>

#include "cpu_common.h"

namespace fresco::cpu {

FR_CPU_KERNEL_PREPARE(softmax_xent) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 0, 0, 1, "softmax_xent");
    *state = nullptr;
    *workspace_bytes = static_cast<uint64_t>(sdk::rows(call->in[0])) * 2 * sizeof(float);
  });
}

FR_CPU_KERNEL_RUN(softmax_xent) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrSoftmaxXentParams>(call);
    const auto& lt = call->in[0];
    expect_dtype(call->in[1], FR_I32, "softmax_xent labels");
    const int64_t m = sdk::rows(lt), c = sdk::cols(lt);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) >= m, FR_ERR_INVALID_ARGUMENT,
                    "softmax_xent: fewer labels than rows");
    FR_PLUGIN_CHECK(!p.write_grad || call->n_out >= 1, FR_ERR_INVALID_ARGUMENT,
                    "softmax_xent: no gradient output");
    FR_PLUGIN_CHECK(call->rout[0].bytes >= sizeof(FrBatchResults), FR_ERR_INVALID_ARGUMENT,
                    "softmax_xent: results range too small");
    FR_PLUGIN_CHECK(call->workspace_bytes >= static_cast<uint64_t>(m) * 2 * sizeof(float),
                    FR_ERR_INVALID_ARGUMENT, "softmax_xent: workspace too small");
    const float* z = sdk::data<float>(lt);
    const int32_t* y = sdk::data<int32_t>(call->in[1]);
    float* dz = p.write_grad ? sdk::data<float>(call->out[0]) : nullptr;
    float* row_loss = static_cast<float*>(call->workspace);
    float* row_hit = row_loss + m;
    const float eps = p.label_smoothing;
    // With the step scalars as rin (dynamic loss scaling) the gradient is multiplied by the loss scale.
    const float scale = call->n_rin >= 1 ? sdk::step_scalars(call->rin[0], "softmax_xent")->loss_scale : 1.0f;
    const float inv_m = scale / static_cast<float>(m);
    for (int64_t r = 0; r < m; ++r)
      FR_PLUGIN_CHECK(
          y[r] >= 0 && y[r] < c, FR_ERR_INVALID_ARGUMENT,
          "softmax_xent: label of row " + std::to_string(r) + " outside [0, " + std::to_string(c) + ")");
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
    auto* out = static_cast<FrBatchResults*>(call->rout[0].data);
    out->loss = static_cast<float>(loss / static_cast<double>(m));
    out->correct = static_cast<float>(hits);
    out->samples = static_cast<float>(m);
  });
}

}  // namespace fresco::cpu
