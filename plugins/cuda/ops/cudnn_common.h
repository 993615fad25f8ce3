// cuDNN helpers shared by the legacy convolution plans (conv_plan.cpp) and the backend engines
// (conv_engine.cpp): the status check, fresco dtype -> cuDNN dtype, the context's lazily created handle.
#pragma once

#include <cudnn.h>

#include <string>

#include "cuda_common.h"

#define FR_CUDNN_CHECK(expr)                                                                                \
  do {                                                                                                      \
    const cudnnStatus_t fr_s_ = (expr);                                                                     \
    if (fr_s_ != CUDNN_STATUS_SUCCESS)                                                                      \
      throw ::fresco::sdk::KernelError(FR_ERR_DEVICE, std::string(__FILE__ ":" FR_SDK_STR(__LINE__) ": ") + \
                                                          #expr + ": " + cudnnGetErrorString(fr_s_));       \
  } while (0)

namespace fresco::cuda {

inline cudnnDataType_t cudnn_type(FrDType t) {
  switch (t) {
    case FR_F32:
      return CUDNN_DATA_FLOAT;
    case FR_F16:
      return CUDNN_DATA_HALF;
    case FR_BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw sdk::KernelError(FR_ERR_UNSUPPORTED,
                             "cuda conv: dtype " + std::to_string(t) + " is not f32, f16 or bf16");
  }
}

inline cudnnHandle_t handle_of(Context* ctx) {
  if (!ctx->dnn) FR_CUDNN_CHECK(cudnnCreate(&ctx->dnn));
  return ctx->dnn;
}

}  // namespace fresco::cuda
