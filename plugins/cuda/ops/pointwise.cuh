// Element-wise CUDA kernels shared by the one-op files (relu, add, gelu, silu, sigmoid, tanh): a grid-stride
// loop over a device functor with one input (forward), two (backward: dy and x or y; add: a and b) or three
// (add_relu_backward: two gradient parts and y), for
// f32, f16 and bf16 tensors (computed in float, ops/dtype.cuh). Outputs may alias inputs element for
// element, as the CPU kernels allow.
#pragma once

#include "ops/dtype.cuh"

namespace fresco::cuda {

// relu and its backward (as the CPU: NaN -> 0); also the fc backward's mask (ops/column_sums.cu).
struct ReluF {
  __device__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct ReluBackwardF {
  __device__ float operator()(float dy, float y) const { return y > 0.0f ? dy : 0.0f; }
};

template <class T, class F>
__global__ void pointwise1_kernel(const T* x, T* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = from_f<T>(f(to_f(x[i])));
}

template <class T, class F>
__global__ void pointwise2_kernel(const T* a, const T* b, T* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = from_f<T>(f(to_f(a[i]), to_f(b[i])));
}

// The same, 16 bytes per load (arena slots are 256-byte aligned, so maps qualify when n fills whole vectors).
template <class T, class F>
__global__ void pointwise1_vec_kernel(const T* x, T* y, int64_t nvec, F f) {
  FR_CUDA_GRID_LOOP(i, nvec) {
    Vec16<T> a = load16(x, i);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kN; ++j) a.v[j] = from_f<T>(f(to_f(a.v[j])));
    store16(y, i, a);
  }
}

template <class T, class F>
__global__ void pointwise2_vec_kernel(const T* a, const T* b, T* y, int64_t nvec, F f) {
  FR_CUDA_GRID_LOOP(i, nvec) {
    Vec16<T> va = load16(a, i);
    const Vec16<T> vb = load16(b, i);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kN; ++j) va.v[j] = from_f<T>(f(to_f(va.v[j]), to_f(vb.v[j])));
    store16(y, i, va);
  }
}

template <class T, class F>
__global__ void pointwise3_kernel(const T* a, const T* b, const T* c, T* y, int64_t n, F f) {
  FR_CUDA_GRID_LOOP(i, n)
  y[i] = from_f<T>(f(to_f(a[i]), to_f(b[i]), to_f(c[i])));
}

template <class T, class F>
__global__ void pointwise3_vec_kernel(const T* a, const T* b, const T* c, T* y, int64_t nvec, F f) {
  FR_CUDA_GRID_LOOP(i, nvec) {
    Vec16<T> va = load16(a, i);
    const Vec16<T> vb = load16(b, i), vc = load16(c, i);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kN; ++j)
      va.v[j] = from_f<T>(f(to_f(va.v[j]), to_f(vb.v[j]), to_f(vc.v[j])));
    store16(y, i, va);
  }
}

template <class F>
FrError* run_pointwise1(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    expect_same_dtype(call, call->out[0].dtype, name);
    with_float_type(call->out[0].dtype, name, [&](auto tag) {
      using T = decltype(tag);
      const T* x = sdk::data<T>(call->in[0]);
      T* y = sdk::data<T>(call->out[0]);
      const int sm = ctx_of(ctx)->sm_count;
      if (vectorizable<T>(n, {x, y})) {
        const int64_t nv = n / Vec16<T>::kN;
        pointwise1_vec_kernel<<<grid_for(nv, 256, sm), 256, 0, stream_of(call)>>>(x, y, nv, f);
      } else {
        pointwise1_kernel<<<grid_for(n, 256, sm), 256, 0, stream_of(call)>>>(x, y, n, f);
      }
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

// y = f(a, b) element by element, 16 bytes per load when the sizes and pointers allow.
template <class T, class F>
void launch_pointwise2(const T* a, const T* b, T* y, int64_t n, F f, int sm, cudaStream_t s) {
  if (vectorizable<T>(n, {a, b, y})) {
    const int64_t nv = n / Vec16<T>::kN;
    pointwise2_vec_kernel<<<grid_for(nv, 256, sm), 256, 0, s>>>(a, b, y, nv, f);
  } else {
    pointwise2_kernel<<<grid_for(n, 256, sm), 256, 0, s>>>(a, b, y, n, f);
  }
  FR_CUDA_LAUNCH_CHECK();
}

template <class F>
FrError* run_pointwise2(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 2, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->in[1]) == n && sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    std::string(name) + ": sizes differ");
    expect_same_dtype(call, call->out[0].dtype, name);
    with_float_type(call->out[0].dtype, name, [&](auto tag) {
      using T = decltype(tag);
      launch_pointwise2(sdk::data<T>(call->in[0]), sdk::data<T>(call->in[1]), sdk::data<T>(call->out[0]), n,
                        f, ctx_of(ctx)->sm_count, stream_of(call));
    });
  });
}

template <class F>
FrError* run_pointwise3(void* ctx, const FrCall* call, const char* name, F f) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 1, 0, 0, name);
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(
        sdk::numel(call->in[1]) == n && sdk::numel(call->in[2]) == n && sdk::numel(call->out[0]) == n,
        FR_ERR_INVALID_ARGUMENT, std::string(name) + ": sizes differ");
    expect_same_dtype(call, call->out[0].dtype, name);
    with_float_type(call->out[0].dtype, name, [&](auto tag) {
      using T = decltype(tag);
      const T *a = sdk::data<T>(call->in[0]), *b = sdk::data<T>(call->in[1]), *c = sdk::data<T>(call->in[2]);
      T* y = sdk::data<T>(call->out[0]);
      const int sm = ctx_of(ctx)->sm_count;
      if (vectorizable<T>(n, {a, b, c, y})) {
        const int64_t nv = n / Vec16<T>::kN;
        pointwise3_vec_kernel<<<grid_for(nv, 256, sm), 256, 0, stream_of(call)>>>(a, b, c, y, nv, f);
      } else {
        pointwise3_kernel<<<grid_for(n, 256, sm), 256, 0, stream_of(call)>>>(a, b, c, y, n, f);
      }
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
