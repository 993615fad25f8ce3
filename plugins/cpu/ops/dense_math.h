// Arithmetic shared by the CPU fc, fc_backward and softmax_xent kernels and by fc_softmax_xent, which runs
// the three in one node: one definition each, so the fused node computes the same bits as the three.
#pragma once

#include <cstdint>

#include "fresco/ops.h"

namespace fresco::cpu {

// y[M,N] = x[M,K] w[N,K]^T (+ b) (+ relu): bias written first, then one packed GEMM adds (fc.cpp).
void fc_forward_f32(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t n, int64_t k,
                    bool relu, void* workspace, uint64_t workspace_bytes);
// dx[M,K] = dy[M,N] w[N,K] (fc_backward.cpp).
void fc_input_grad_f32(const float* dy, const float* w, float* dx, int64_t m, int64_t n, int64_t k,
                       void* workspace, uint64_t workspace_bytes);
// Zeroes g where y <= 0 (a fused relu's backward, in place).
void relu_mask_f32(float* g, const float* y, int64_t n);
// Throws (an FR_ERR_INVALID_ARGUMENT error naming `op` and the row) unless every y[r] of the m rows lies in
// [0, c) (softmax_xent.cpp).
void check_labels(const int32_t* y, int64_t m, int64_t c, const char* op);
// Softmax cross-entropy over rows of z[M,C] with labels y (each already checked to lie in [0, C)): the loss
// and top-1 hits summed in row order into *out, dz = (softmax - target) * scale / M when dz is given; row_ws
// holds 2M floats (softmax_xent.cpp).
void softmax_xent_f32(const float* z, const int32_t* y, float* dz, int64_t m, int64_t c, float eps,
                      float scale, float* row_ws, FrBatchResults* out);

}  // namespace fresco::cpu
