// Batchnorm's two gradient sums on the CPU, sum g and sum g (x - mean) per channel of a [rows, C] map, over
// batchnorm's fixed row chunks (batchnorm_chunks.h: double partials per chunk, combined in chunk order, so
// the result does not depend on the thread count). Used by batchnorm_backward for its own pass and by the
// masking passes that hand the sums over (relu_backward / add_relu_backward with gsums, ops.h "Gradient
// sums"), so both add the same terms in the same order. Tests: test_batchnorm.cpp.
#pragma once

#include <algorithm>

#include "cpu_common.h"
#include "fresco/grad_sums_checks.hpp"
#include "ops/batchnorm_chunks.h"

namespace fresco::cpu {

// Workspace of the partials: chunks * C * 2 doubles.
inline uint64_t grad_sums_workspace(const BnShape& s) {
  return static_cast<uint64_t>(s.chunks) * static_cast<uint64_t>(s.c) * 2 * sizeof(double);
}

// part[chunk * 2C + k] = the chunk's sum of grad(i) over channel k, part[chunk * 2C + C + k] that of grad(i)
// (x - mean[k]); grad(i) is the gradient at element i.
template <class G>
void grad_sums_partials(const BnShape& s, G grad, const float* x, const float* mean, double* part) {
  const int64_t c = s.c;
  parallel_chunks(s.rows, s.grain, [&](int64_t a, int64_t b) {
    double* sdy = part + (a / s.grain) * c * 2;
    double* sdyx = sdy + c;
    std::fill(sdy, sdy + 2 * c, 0.0);
    for (int64_t i = a; i < b; ++i) {
      const float* xr = x + i * c;
      for (int64_t k = 0; k < c; ++k) {
        const float g = grad(i * c + k);
        sdy[k] += g;
        sdyx[k] += static_cast<double>(g) * (static_cast<double>(xr[k]) - mean[k]);
      }
    }
  });
}

// Channel k's two totals over the chunks, in chunk order.
inline void grad_sums_total(const BnShape& s, const double* part, int64_t k, double& dy, double& dyx) {
  dy = 0.0, dyx = 0.0;
  for (int64_t j = 0; j < s.chunks; ++j) dy += part[j * s.c * 2 + k], dyx += part[j * s.c * 2 + s.c + k];
}

// The gsums output of a masking pass: the totals of g (as stored) and x, rounded to f32 once.
inline void write_grad_sums(const BnShape& s, const float* g, const float* x, const float* mean, double* part,
                            float* sums) {
  grad_sums_partials(
      s, [&](int64_t i) { return g[i]; }, x, mean, part);
  for (int64_t k = 0; k < s.c; ++k) {
    double dy, dyx;
    grad_sums_total(s, part, k, dy, dyx);
    sums[k] = static_cast<float>(dy);
    sums[s.c + k] = static_cast<float>(dyx);
  }
}

// A masking pass's (relu_backward, add_relu_backward: the first x at in[x_at]) workspace, and its gsums from
// the dx it wrote, one per (x, save_mean) pair; nothing when the call has no gsums output.
inline uint64_t masking_pass_workspace(const FrCall* call, uint32_t x_at, const char* op) {
  return sdk::grad_sums_operands(call, x_at, op).targets ? grad_sums_workspace(bn_shape(call->in[x_at], op))
                                                         : 0;
}
inline void masking_pass_sums(const FrCall* call, uint32_t x_at, const char* op) {
  const sdk::GradSumsOperands g = sdk::grad_sums_operands(call, x_at, op);
  if (!g.targets) return;
  const BnShape s = bn_shape(call->in[x_at], op);
  FR_PLUGIN_CHECK(call->workspace && call->workspace_bytes >= grad_sums_workspace(s), FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": run without the workspace asked by prepare");
  for (int t = 0; t < g.targets; ++t)
    write_grad_sums(s, sdk::data<float>(call->out[0]), static_cast<const float*>(g.x[t]), g.mean[t],
                    static_cast<double*>(call->workspace), g.sums[t]);
}

}  // namespace fresco::cpu
