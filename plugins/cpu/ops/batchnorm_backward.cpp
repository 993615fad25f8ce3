// CPU batchnorm backward (training mode, per channel = last dim): dbeta = sum(dy), dgamma = sum(dy * xhat),
// dx = gamma * invstd / n * (n * dy - dbeta - xhat * dgamma). The channel sums are double partials per fixed
// row chunk combined in chunk order (independent of the thread count); dx is element-wise, so it may alias
// dy. With params.relu (a fused relu) a sixth input y masks the incoming gradient: dy * (y > 0) (a seventh,
// beta, is not needed here). Without one, a sixth input may be gsums (ops.h, "Gradient sums"), the two sums
// the pass that wrote dy computed (ops/grad_sums.h, the same chunks): then there is no pass over dy and x for
// them. With gsums and two outputs {dgamma, dbeta} (the weights-only form, ops.h) it writes no dx. Test:
// test_batchnorm.cpp.
#include <algorithm>
#include <cmath>

#include "cpu_common.h"
#include "fresco/batchnorm_rules.h"
#include "fresco/grad_sums_checks.hpp"
#include "ops/grad_sums.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

namespace {

// Workspace: double partial[chunks * C * 2] (sum dy, sum dy * (x - mean)), then float coef[4 * C].
uint64_t bnb_workspace(const BnShape& s) {
  const auto c = static_cast<uint64_t>(s.c);
  return grad_sums_workspace(s) + 4 * c * sizeof(float);
}

void check_c(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm_backward: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements, expected C = " + std::to_string(c));
}

}  // namespace

static bool has_relu(const FrCall* call) {
  return call->params && sdk::params<FrBatchNormParams>(call).relu;
}
// At least 5 inputs, 6 (the fused relu's output) when params.relu is set; without it a sixth is gsums.
static uint32_t inputs_of(const FrCall* call) {
  return has_relu(call) ? 6u : 5u;
}

FR_CPU_KERNEL_PREPARE(batchnorm_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, inputs_of(call), 2, 0, 0, "batchnorm_backward");
    sdk::bn_backward_dgamma_index(call);  // checks the outputs
    *state = nullptr;
    *workspace_bytes = bnb_workspace(bn_shape(call->in[1], "batchnorm_backward"));
  });
}

FR_CPU_KERNEL_RUN(batchnorm_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, inputs_of(call), 2, 0, 0, "batchnorm_backward");
    const uint32_t gi = sdk::bn_backward_dgamma_index(call);  // 0: the weights-only form, no dx
    const BnShape s = bn_shape(call->in[1], "batchnorm_backward");
    const int64_t rows = s.rows, c = s.c;
    FR_PLUGIN_CHECK(sdk::numel(call->in[0]) == rows * c && (gi == 0 || sdk::numel(call->out[0]) == rows * c),
                    FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: dy, x and dx sizes differ");
    check_c(call->in[2], c, "gamma");
    check_c(call->in[3], c, "save_mean");
    check_c(call->in[4], c, "save_invstd");
    check_c(call->out[gi], c, "dgamma");
    check_c(call->out[gi + 1], c, "dbeta");
    FR_PLUGIN_CHECK(call->workspace_bytes >= bnb_workspace(s), FR_ERR_INVALID_ARGUMENT,
                    "batchnorm_backward: workspace too small");
    const float* dy = sdk::data<float>(call->in[0]);
    const float* x = sdk::data<float>(call->in[1]);
    const float* gamma = sdk::data<float>(call->in[2]);
    const float* mean = sdk::data<float>(call->in[3]);
    const float* invstd = sdk::data<float>(call->in[4]);
    const float* relu_y = nullptr;  // fused relu: the incoming gradient is dy * (y > 0)
    if (has_relu(call)) {           // a seventh input, beta, is for backends that recompute the mask
      FR_PLUGIN_CHECK(sdk::numel(call->in[5]) == rows * c, FR_ERR_INVALID_ARGUMENT,
                      "batchnorm_backward: the fused relu's y differs in size from x");
      relu_y = sdk::data<float>(call->in[5]);
    }
    float* dx = gi == 0 ? nullptr : sdk::data<float>(call->out[0]);
    float* dgamma = sdk::data<float>(call->out[gi]);
    float* dbeta = sdk::data<float>(call->out[gi + 1]);
    double* part = static_cast<double*>(call->workspace);
    float* coef_a = reinterpret_cast<float*>(part + s.chunks * c * 2);  // gamma * invstd
    float* coef_b = coef_a + c;                                         // dbeta / n
    float* coef_k = coef_b + c;                                         // dgamma * invstd / n
    float* coef_m = coef_k + c;                                         // mean
    const float* given = sdk::bn_grad_sums_input(call, c);  // the sums from the pass that wrote dy
    // The incoming gradient at element i, masked by the fused relu when there is one; each form its own
    // loop, so both vectorise (ops/relu_mask.h).
    const auto plain = [dy](int64_t i) { return dy[i]; };
    const auto masked = [dy, relu_y](int64_t i) { return relu_masked(dy[i], relu_y[i]); };
    if (!given) {
      if (relu_y)
        grad_sums_partials(s, masked, x, mean, part);
      else
        grad_sums_partials(s, plain, x, mean, part);
    }
    const double n = static_cast<double>(rows);
    for (int64_t k = 0; k < c; ++k) {
      double db, dyx;
      if (given)
        db = given[k], dyx = given[c + k];
      else
        grad_sums_total(s, part, k, db, dyx);
      const FrBnGradCoefficients cf = fr_bn_grad_coefficients(db, dyx, gamma[k], invstd[k], n);
      coef_a[k] = cf.a, coef_b[k] = cf.b, coef_k[k] = cf.k, coef_m[k] = mean[k];
      dgamma[k] = cf.dgamma;
      dbeta[k] = cf.dbeta;
    }
    if (!dx) return;  // the weights-only form: the conv's weight gradient applies dx (ops.h)
    const auto write_dx = [&](auto grad) {
      parallel_chunks(rows, s.grain, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) {
          const float* xr = x + i * c;
          float* dxr = dx + i * c;
          for (int64_t k = 0; k < c; ++k)
            dxr[k] = fr_bn_dx_value(grad(i * c + k), xr[k], coef_m[k], coef_a[k], coef_b[k], coef_k[k]);
        }
      });
    };
    if (relu_y)
      write_dx(masked);
    else
      write_dx(plain);
  });
}

}  // namespace fresco::cpu
