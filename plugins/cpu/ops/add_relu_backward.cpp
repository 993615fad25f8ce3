// CPU add_relu_backward dx = (a + b) * (y > 0): the backward of a fused add+relu join whose output gradient
// arrives in two parts, summed and masked in one pass; dx may alias a (or b when b is not compact). With x
// and save_mean as fourth and fifth inputs it also writes gsums (ops.h, "Gradient sums"; ops/grad_sums.h).
// With FrAddReluBackwardParams b is a strided 1x1 conv's compact input gradient (ops.h). Tests:
// test_add_gelu_flatten.cpp, test_batchnorm.cpp (gradient sums).
#include "cpu_common.h"
#include "fresco/compact_grad.hpp"
#include "ops/grad_sums.h"
#include "ops/relu_mask.h"

namespace fresco::cpu {

FR_CPU_KERNEL_PREPARE(add_relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "add_relu_backward");
    *state = nullptr;
    *workspace_bytes = masking_pass_workspace(call, 3, "add_relu_backward");
  });
}

FR_CPU_KERNEL_RUN(add_relu_backward) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, "add_relu_backward");
    const sdk::CompactPart part = sdk::add_relu_backward_part(call, "add_relu_backward");
    const int64_t n = sdk::numel(call->in[0]);
    const float* a = sdk::data<float>(call->in[0]);
    const float* b = sdk::data<float>(call->in[1]);
    const float* y = sdk::data<float>(call->in[2]);
    float* dx = sdk::data<float>(call->out[0]);
    if (!part.compact()) {
      parallel_chunks(n, 1 << 15, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) dx[i] = relu_masked(a[i] + b[i], y[i]);
      });
    } else {  // b at the positions (n, stride_h p, stride_w q) only; + 0 elsewhere, the full-size part's bits
      const int64_t c = part.c;
      parallel_chunks(n / c, 256, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t w = r % part.w, h = (r / part.w) % part.h, img = r / (part.w * part.h);
          const bool hit = h % part.stride_h == 0 && w % part.stride_w == 0;
          const float* br =
              hit ? b + ((img * part.p + h / part.stride_h) * part.q + w / part.stride_w) * c : nullptr;
          for (int64_t k = 0; k < c; ++k) {
            const int64_t i = r * c + k;
            dx[i] = relu_masked(a[i] + (hit ? br[k] : 0.0f), y[i]);
          }
        }
      });
    }
    masking_pass_sums(call, 3, "add_relu_backward");
  });
}

}  // namespace fresco::cpu
