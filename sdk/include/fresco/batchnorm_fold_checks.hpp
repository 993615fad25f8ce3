// Checks of batchnorm_fold and channel_affine calls (ops.h: batchnorm's folded inference form) shared by
// every backend, with messages that name the op. Header-only, C++17.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "fresco/ops.h"
#include "fresco/plugin.hpp"

namespace fresco::sdk {

// {gamma, beta, running_mean, running_var} -> {scale, shift}, all f32 [C]; returns C.
inline int64_t batchnorm_fold_channels(const FrCall* call) {
  expect_arity(call, 4, 2, 0, 0, "batchnorm_fold");
  const int64_t c = numel(call->in[0]);
  FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, "batchnorm_fold: no channels");
  for (uint32_t i = 0; i < 4; ++i)
    FR_PLUGIN_CHECK(numel(call->in[i]) == c && call->in[i].dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
                    "batchnorm_fold: gamma, beta, running_mean and running_var must be f32 with C = " +
                        std::to_string(c) + " elements each");
  for (uint32_t i = 0; i < 2; ++i)
    FR_PLUGIN_CHECK(
        numel(call->out[i]) == c && call->out[i].dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
        "batchnorm_fold: scale and shift must be f32 with C = " + std::to_string(c) + " elements");
  const float eps = params<FrBatchNormParams>(call).eps;
  FR_PLUGIN_CHECK(eps >= 0.0f && std::isfinite(eps), FR_ERR_INVALID_ARGUMENT, "batchnorm_fold: bad eps");
  return c;
}

using AffineShape = ChannelRows;  // positions and channels of x seen as [rows, C]

// {x [.., C], scale [C], shift [C]} -> {y} of x's size and dtype.
inline AffineShape channel_affine_shape(const FrCall* call) {
  expect_arity(call, 3, 1, 0, 0, "channel_affine");
  const FrTensor& x = call->in[0];
  const int64_t c = channel_rows(x, "channel_affine").c;
  FR_PLUGIN_CHECK(numel(call->in[1]) == c && numel(call->in[2]) == c && call->in[1].dtype == FR_F32 &&
                      call->in[2].dtype == FR_F32,
                  FR_ERR_INVALID_ARGUMENT,
                  "channel_affine: scale and shift must be f32 with C = " + std::to_string(c) + " elements");
  FR_PLUGIN_CHECK(numel(call->out[0]) == numel(x) && call->out[0].dtype == x.dtype, FR_ERR_INVALID_ARGUMENT,
                  "channel_affine: y must have x's size and dtype");
  params<FrChannelAffineParams>(call);  // checks the params size
  return {numel(x) / c, c};
}

}  // namespace fresco::sdk
