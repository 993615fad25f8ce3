// CPU fc_softmax_xent (ops.h): the training head in one node, computed by the very functions the three nodes
// it replaces use (ops/dense_math.h: fc forward, softmax cross-entropy, fc input gradient, relu mask), so the
// bits are theirs. Test: tests/plugins/cpu/test_fc_softmax_xent.cpp.
#include <algorithm>

#include "cpu_common.h"
#include "fresco/softmax_xent_geometry.hpp"
#include "gemm.h"
#include "ops/dense_math.h"

namespace fresco::cpu {

namespace {
// The GEMMs' workspace follows the two loss floats per row, at a 64-byte boundary (gemm.h).
uint64_t gemm_bytes(int64_t m, int64_t n, int64_t k) {
  return std::max(gemm_workspace_bytes(m, n, k, max_threads()), gemm_workspace_bytes(m, k, n, max_threads()));
}
uint64_t gemm_offset(const FrCall* call) {
  return (sdk::xent_workspace_bytes(call) + 63) & ~uint64_t{63};
}
}  // namespace

FR_CPU_KERNEL_PREPARE(fc_softmax_xent) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 3, 0, 1, "fc_softmax_xent");
    *state = nullptr;
    const int64_t m = sdk::rows(call->in[0]), k = sdk::cols(call->in[0]), n = sdk::rows(call->in[1]);
    *workspace_bytes = gemm_offset(call) + gemm_bytes(m, n, k);
  });
}

FR_CPU_KERNEL_RUN(fc_softmax_xent) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrFcSoftmaxXentParams>(call);
    const sdk::FcXentShape s = sdk::fc_xent_shape(call);
    const int64_t m = s.m, n = s.n, k = s.k;
    const float* x = sdk::data<float>(call->in[0]);
    const float* w = sdk::data<float>(call->in[1]);
    const int32_t* labels = sdk::data<int32_t>(call->in[2]);
    float* logits = sdk::data<float>(call->out[0]);
    float* dlogits = sdk::data<float>(call->out[1]);
    float* dx = sdk::data<float>(call->out[2]);
    check_labels(labels, m, n, "fc_softmax_xent");
    auto* row_ws = static_cast<float*>(call->workspace);
    FR_PLUGIN_CHECK(call->workspace_bytes >= gemm_offset(call) + gemm_bytes(m, n, k), FR_ERR_INVALID_ARGUMENT,
                    "fc_softmax_xent: workspace too small");
    void* gemm_ws = static_cast<char*>(call->workspace) + gemm_offset(call);
    const uint64_t gemm_ws_bytes = call->workspace_bytes - gemm_offset(call);
    fc_forward_f32(x, w, p.has_bias ? sdk::data<float>(call->in[3]) : nullptr, logits, m, n, k, false,
                   gemm_ws, gemm_ws_bytes);
    softmax_xent_f32(logits, labels, dlogits, m, n, p.label_smoothing, s.ls ? s.ls->loss_scale : 1.0f, row_ws,
                     static_cast<FrBatchResults*>(call->rout[0].data));
    fc_input_grad_f32(dlogits, w, dx, m, n, k, gemm_ws, gemm_ws_bytes);
    if (p.mask_input) relu_mask_f32(dx, x, m * k);
  });
}

}  // namespace fresco::cpu
