// Storage types of the CUDA kernels: fp32, fp16 and bf16 tensors are loaded into float, computed in float and
// stored back rounded to nearest (even). `with_float_type` turns a tensor's FrDType into a C++ type for a
// generic lambda, so one templated kernel serves the three dtypes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "cuda_common.h"

namespace fresco::cuda {

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// 16 bytes of T (8 halves or 4 floats) moved as one uint4: the vector unit of the element-wise kernels.
template <class T>
struct Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};
template <class T>
__device__ __forceinline__ Vec16<T> load16(const T* p, int64_t i) {
  const uint4 u = reinterpret_cast<const uint4*>(p)[i];
  Vec16<T> r;
  memcpy(&r, &u, 16);
  return r;
}
template <class T>
__device__ __forceinline__ void store16(T* p, int64_t i, const Vec16<T>& r) {
  uint4 u;
  memcpy(&u, &r, 16);
  reinterpret_cast<uint4*>(p)[i] = u;
}
// True when every pointer is 16-byte aligned and n fills whole vectors of T.
template <class T>
inline bool vectorizable(int64_t n, std::initializer_list<const void*> ptrs) {
  return n % Vec16<T>::kN == 0 && aligned16(ptrs);
}

// Calls f(T{}) with T the storage type of `dtype` (float, __half or __nv_bfloat16); throws for others.
template <class F>
void with_float_type(uint32_t dtype, const char* op, F&& f) {
  switch (dtype) {
    case FR_F32:
      f(float{});
      return;
    case FR_F16:
      f(__half{});
      return;
    case FR_BF16:
      f(__nv_bfloat16{});
      return;
    default:
      throw sdk::KernelError(FR_ERR_UNSUPPORTED, std::string(op) + ": dtype " + std::to_string(dtype) +
                                                     " is not f32, f16 or bf16");
  }
}

// Calls f(T{}) with T = __half or __nv_bfloat16 for a 16-bit `dtype`; throws for others.
template <class F>
void with_half_type(uint32_t dtype, const char* op, F&& f) {
  FR_PLUGIN_CHECK(dtype == FR_F16 || dtype == FR_BF16, FR_ERR_UNSUPPORTED,
                  std::string(op) + ": f16 or bf16 only, found dtype " + std::to_string(dtype));
  if (dtype == FR_F16)
    f(__half{});
  else
    f(__nv_bfloat16{});
}

// Every input and output tensor of the call has dtype `t`.
inline void expect_same_dtype(const FrCall* call, uint32_t t, const char* op) {
  for (uint32_t i = 0; i < call->n_in; ++i)
    FR_PLUGIN_CHECK(call->in[i].dtype == t, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": input " + std::to_string(i) + " has another dtype than the output");
  for (uint32_t i = 0; i < call->n_out; ++i)
    FR_PLUGIN_CHECK(call->out[i].dtype == t, FR_ERR_INVALID_ARGUMENT,
                    std::string(op) + ": outputs must share one dtype");
}

}  // namespace fresco::cuda
