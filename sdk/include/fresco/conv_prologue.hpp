// The batchnorm prologue operands of conv2d (ops.h, "Batchnorm prologue"): the four inputs {gamma, beta,
// save_mean, save_invstd} after its plain ones and the applied map it writes as its second output, the
// conv2d_backward's batchnorm gradient epilogue, the training batchnorm's statistics-only form, checked the
// same way by every backend, and the scale / shift every backend derives from them. Header-only, C++17.
#pragma once

#include <cmath>
#include <string>

#include "fresco/conv_backward_parts.hpp"
#include "fresco/conv_geometry.hpp"
#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// A batchnorm's affine parameters and saved batch statistics, f32 [C] each (all null: no prologue).
struct BnPrologue {
  const float *gamma, *beta, *mean, *invstd;
};

// Inputs of a conv2d call before the prologue's: x, w and the bias when it has one.
inline uint32_t conv_plain_inputs(const FrCall* call) {
  return params<FrConvParams>(call).has_bias ? 3u : 2u;
}
inline bool has_conv_prologue(const FrCall* call) {
  return call->n_in > conv_plain_inputs(call);
}

// The four batchnorm operands {gamma, beta, save_mean, save_invstd} at call->in[first ..], each checked f32
// with c elements (`what` names them in errors, e.g. "conv2d: the prologue's").
inline BnPrologue bn_operands(const FrCall* call, uint32_t first, int64_t c, const char* what) {
  static const char* const kNames[4] = {"gamma", "beta", "save_mean", "save_invstd"};
  for (uint32_t i = 0; i < 4; ++i) {
    const FrTensor& t = call->in[first + i];
    FR_PLUGIN_CHECK(t.dtype == FR_F32 && numel(t) == c, FR_ERR_INVALID_ARGUMENT,
                    std::string(what) + " " + kNames[i] + " must be f32 with C = " + std::to_string(c) +
                        " elements, got " + std::to_string(numel(t)) + " of dtype " +
                        std::to_string(t.dtype));
  }
  return BnPrologue{data<float>(call->in[first]), data<float>(call->in[first + 1]),
                    data<float>(call->in[first + 2]), data<float>(call->in[first + 3])};
}

// Operand t (named `what`) of `op` must have the shape and dtype of `like` (named `like_name`).
inline void expect_same_map(const FrTensor& t, const FrTensor& like, const char* what, const char* like_name,
                            const char* op = "conv2d_backward") {
  bool same = t.ndim == like.ndim && t.dtype == like.dtype;
  for (uint32_t d = 0; same && d < like.ndim; ++d) same = t.dims[d] == like.dims[d];
  FR_PLUGIN_CHECK(same, FR_ERR_INVALID_ARGUMENT,
                  std::string(op) + ": " + what + " " + shape_str(t) + " must have " + like_name + " shape " +
                      shape_str(like) + " and dtype");
}

// The prologue of a conv2d call: none (all null) without prologue inputs, else exactly four after the plain
// ones, each f32 with x's C elements, or five with the join prologue's r (x's shape and dtype; `residual`
// when not null), and a second output of x's shape and dtype (the applied map, `applied` when not null).
// Data pointers are null during prepare.
inline BnPrologue conv_prologue(const FrCall* call, void** applied = nullptr,
                                const void** residual = nullptr) {
  const uint32_t plain = conv_plain_inputs(call);
  if (applied) *applied = nullptr;
  if (residual) *residual = nullptr;
  if (call->n_in == plain) return BnPrologue{nullptr, nullptr, nullptr, nullptr};
  FR_PLUGIN_CHECK(call->n_in == plain + 4 || call->n_in == plain + 5, FR_ERR_INVALID_ARGUMENT,
                  "conv2d: expected " + std::to_string(plain) + " inputs, or " + std::to_string(plain + 4) +
                      " with a batchnorm prologue (" + std::to_string(plain + 5) +
                      " with a join prologue), got " + std::to_string(call->n_in));
  const FrTensor& x = call->in[0];
  const BnPrologue bn =
      bn_operands(call, plain, x.ndim >= 1 ? x.dims[x.ndim - 1] : 0, "conv2d: the prologue's");
  if (call->n_in == plain + 5) {
    expect_same_map(call->in[plain + 4], x, "the join prologue's residual", "x's", "conv2d");
    if (residual) *residual = call->in[plain + 4].data;
  }
  FR_PLUGIN_CHECK(call->n_out >= 2 && numel(call->out[1]) == numel(x) && call->out[1].dtype == x.dtype,
                  FR_ERR_INVALID_ARGUMENT,
                  "conv2d: with a batchnorm prologue the second output is the applied map, of x's shape and "
                  "dtype");
  if (applied) *applied = call->out[1].data;
  return bn;
}

// The batchnorm gradient epilogue of a conv2d_backward call (ops.h): bx (the batchnorm's input), the
// batchnorm's parameters and statistics, and the gsums output; all null without the five inputs.
struct BnGradEpilogue {
  const void* bx;
  BnPrologue bn;
  float* gsums;
};
// The inputs of a conv2d_backward call with the join epilogue (ops.h): {dy, x, w, b, bx, save_mean}.
constexpr uint32_t kConvJoinEpilogueInputs = 6;
// Five more inputs on a part that writes dx: the epilogue (on a part that writes none: the weight
// gradient's prologue, below; three more: the join epilogue, below).
inline bool has_conv_grad_epilogue(const FrCall* call) {
  return call->n_in > 3 && call->n_in != kConvJoinEpilogueInputs &&
         conv_backward_outputs(params<FrConvBackwardParams>(call)).dx >= 0;
}
// Three more inputs on a part that writes dx: the join epilogue.
inline bool has_conv_join_epilogue(const FrCall* call) {
  return call->n_in == kConvJoinEpilogueInputs &&
         conv_backward_outputs(params<FrConvBackwardParams>(call)).dx >= 0;
}
// The inputs a conv2d_backward call must have: 3, or 8 with the batchnorm gradient epilogue or the weight
// gradient's prologue, or 6 with the join epilogue.
inline uint32_t conv_backward_inputs(const FrCall* call) {
  return has_conv_join_epilogue(call) ? kConvJoinEpilogueInputs : call->n_in > 3 ? 8 : 3;
}
// Checks the epilogue's operands of a conv2d_backward call whose part writes dx at output dx_index (-1:
// none) and `outputs` outputs without gsums: exactly five inputs after {dy, x, w}, bx of x's shape and dtype,
// the four f32 with x's C elements, gsums f32 [2C] last. Data pointers are null during prepare.
inline BnGradEpilogue conv_grad_epilogue(const FrCall* call, int dx_index, uint32_t outputs) {
  if (!has_conv_grad_epilogue(call))
    return BnGradEpilogue{nullptr, {nullptr, nullptr, nullptr, nullptr}, nullptr};
  FR_PLUGIN_CHECK(call->n_in == 8, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: expected 3 inputs, or 8 with a batchnorm gradient epilogue, got " +
                      std::to_string(call->n_in));
  FR_PLUGIN_CHECK(dx_index >= 0, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: the batchnorm gradient epilogue needs a part that writes dx");
  const FrTensor &x = call->in[1], &bx = call->in[3];
  const int64_t c = x.ndim >= 1 ? x.dims[x.ndim - 1] : 0;
  expect_same_map(bx, x, "the gradient epilogue's bx", "x's");
  const BnPrologue bn = bn_operands(call, 4, c, "conv2d_backward: the gradient epilogue's");
  FR_PLUGIN_CHECK(call->n_out == outputs + 1, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: with a batchnorm gradient epilogue the part writes " +
                      std::to_string(outputs + 1) + " outputs (gsums last), got " +
                      std::to_string(call->n_out));
  const FrTensor& s = call->out[outputs];
  FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * c, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: gsums must be f32 with 2C = " + std::to_string(2 * c) +
                      " elements, got " + std::to_string(numel(s)) + " of dtype " + std::to_string(s.dtype));
  return BnGradEpilogue{bx.data, bn, data<float>(s)};
}

// The join epilogue of a conv2d_backward call (ops.h): the other gradient part b, the batchnorm input bx
// (x's shape and dtype each), that batchnorm's save_mean (f32 [C]) and the gsums output; all null without the
// three inputs. The mask is x itself (a relu's output).
struct ConvJoinEpilogue {
  const void *b, *bx;
  const float* mean;
  float* gsums;
};
// Checks the join epilogue's operands of a call whose part writes dx at dx_index and `outputs` outputs
// without gsums. Data pointers are null during prepare.
inline ConvJoinEpilogue conv_join_epilogue(const FrCall* call, int dx_index, uint32_t outputs) {
  if (!has_conv_join_epilogue(call)) return ConvJoinEpilogue{nullptr, nullptr, nullptr, nullptr};
  FR_PLUGIN_CHECK(dx_index >= 0, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: the join epilogue needs a part that writes dx");
  const FrTensor& x = call->in[1];
  const int64_t c = x.ndim >= 1 ? x.dims[x.ndim - 1] : 0;
  expect_same_map(call->in[3], x, "the join epilogue's b", "x's");
  expect_same_map(call->in[4], x, "the join epilogue's bx", "x's");
  const FrTensor& mean = call->in[5];
  FR_PLUGIN_CHECK(mean.dtype == FR_F32 && numel(mean) == c, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: the join epilogue's save_mean must be f32 with C = " + std::to_string(c) +
                      " elements, got " + std::to_string(numel(mean)) + " of dtype " +
                      std::to_string(mean.dtype));
  FR_PLUGIN_CHECK(call->n_out == outputs + 1, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: with the join epilogue the part writes " + std::to_string(outputs + 1) +
                      " outputs (gsums last), got " + std::to_string(call->n_out));
  const FrTensor& s = call->out[outputs];
  FR_PLUGIN_CHECK(s.dtype == FR_F32 && numel(s) == 2 * c, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: gsums must be f32 with 2C = " + std::to_string(2 * c) +
                      " elements, got " + std::to_string(numel(s)) + " of dtype " + std::to_string(s.dtype));
  return ConvJoinEpilogue{call->in[3].data, call->in[4].data, data<const float>(mean), data<float>(s)};
}

// The batchnorm gradient prologue of a conv2d_backward call that writes no dx (ops.h): y (the conv's output,
// the batchnorm's input), the batchnorm's gamma and saved statistics, and its gradient sums; all null
// without the five inputs.
struct BnWgradPrologue {
  const void* y;
  const float *gamma, *mean, *invstd, *gsums;
};
inline bool has_wgrad_bn_prologue(const FrCall* call) {
  return call->n_in > 3 && conv_backward_outputs(params<FrConvBackwardParams>(call)).dx < 0;
}
// Checks the prologue's operands: exactly five inputs after {dy, x, w}, y of dy's shape and dtype, gamma,
// save_mean, save_invstd f32 with K elements and gsums f32 with 2K. Data pointers are null during prepare.
inline BnWgradPrologue wgrad_bn_prologue(const FrCall* call) {
  if (!has_wgrad_bn_prologue(call)) return BnWgradPrologue{nullptr, nullptr, nullptr, nullptr, nullptr};
  FR_PLUGIN_CHECK(call->n_in == 8, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: expected 3 inputs, or 8 with a batchnorm gradient prologue, got " +
                      std::to_string(call->n_in));
  const uint32_t outputs = conv_backward_outputs(params<FrConvBackwardParams>(call)).count;
  FR_PLUGIN_CHECK(call->n_out == outputs, FR_ERR_INVALID_ARGUMENT,
                  "conv2d_backward: with a batchnorm gradient prologue the part writes " +
                      std::to_string(outputs) + " outputs (its weight gradients), got " +
                      std::to_string(call->n_out));
  const FrTensor &dy = call->in[0], &y = call->in[3];
  const int64_t k = dy.ndim >= 1 ? dy.dims[dy.ndim - 1] : 0;
  expect_same_map(y, dy, "the gradient prologue's y", "dy's");
  static const char* const kNames[4] = {"gamma", "save_mean", "save_invstd", "gsums"};
  for (uint32_t i = 0; i < 4; ++i) {
    const FrTensor& t = call->in[4 + i];
    const int64_t want = i == 3 ? 2 * k : k;
    FR_PLUGIN_CHECK(t.dtype == FR_F32 && numel(t) == want, FR_ERR_INVALID_ARGUMENT,
                    std::string("conv2d_backward: the gradient prologue's ") + kNames[i] +
                        " must be f32 with " + std::to_string(want) + " elements, got " +
                        std::to_string(numel(t)) + " of dtype " + std::to_string(t.dtype));
  }
  return BnWgradPrologue{y.data, data<float>(call->in[4]), data<float>(call->in[5]), data<float>(call->in[6]),
                         data<float>(call->in[7])};
}

// Checks a conv2d_backward call's operands for the part with outputs o, every optional form included: the
// input count of its form, the part's outputs plus gsums after an epilogue, and each form's operands (data
// pointers are null during prepare). Every backend's prepare and run check the call this way.
inline void check_conv_backward_operands(const FrCall* call, const ConvBackwardOutputs& o) {
  const bool gsums = has_conv_grad_epilogue(call) || has_conv_join_epilogue(call);
  expect_arity(call, conv_backward_inputs(call), o.count + (gsums ? 1 : 0), 0, 0, "conv2d_backward");
  conv_grad_epilogue(call, o.dx, o.count);
  conv_join_epilogue(call, o.dx, o.count);
  wgrad_bn_prologue(call);
}

// Where a training batchnorm call's save_mean (then save_invstd) is: 1 after y, or 0 in the statistics-only
// form (two outputs); checked: two or three outputs.
inline uint32_t bn_statistics_index(const FrCall* call) {
  FR_PLUGIN_CHECK(call->n_out == 2 || call->n_out == 3, FR_ERR_INVALID_ARGUMENT,
                  "batchnorm (training): expected outputs {y, save_mean, save_invstd} or, statistics only, "
                  "{save_mean, save_invstd}; got " +
                      std::to_string(call->n_out));
  return call->n_out - 2;
}

// Channel k's scale = gamma * invstd and shift = beta - mean * scale, each rounded once in f32 (the CUDA
// batchnorm's own forward, ops/batchnorm_relu_mask.cuh); the prologue's value is then
// relu(fma(x, scale, shift)), rounded to the map's dtype.
inline void bn_prologue_scale_shift(const BnPrologue& p, int64_t k, float* scale, float* shift) {
  const float s = p.gamma[k] * p.invstd[k];
  *scale = s;
  *shift = std::fma(-p.mean[k], s, p.beta[k]);
}
inline float bn_prologue_value(float x, float scale, float shift) {
  const float v = std::fma(x, scale, shift);
  return v > 0.0f ? v : 0.0f;
}
// The join prologue's value (ops.h): the residual r added to the normalized x in f32, then the relu.
inline float bn_prologue_value(float x, float scale, float shift, float r) {
  const float v = std::fma(x, scale, shift) + r;
  return v > 0.0f ? v : 0.0f;
}

}  // namespace fresco::sdk
