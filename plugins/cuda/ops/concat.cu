// CUDA concat over channels (NHWC) and its backward, the split, for f32/f16/bf16: one thread per element of
// the concatenated side (a gather forward, a scatter of disjoint elements backward). Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernels).
#include "fresco/concat_geometry.hpp"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
template <class T>
__global__ void concat_kernel(const T* a, const T* b, T* y, sdk::ConcatShape s, bool split) {
  const int64_t c = s.ca + s.cb;
  FR_CUDA_GRID_LOOP(i, s.rows * c) {
    const int64_t r = i / c, ch = i % c;
    T* part = ch < s.ca ? const_cast<T*>(a) + r * s.ca + ch : const_cast<T*>(b) + r * s.cb + (ch - s.ca);
    if (split)
      *part = y[i];
    else
      y[i] = *part;
  }
}

FrError* run_concat(void* ctx, const FrCall* call, bool forward) noexcept {
  const char* op = forward ? "concat" : "concat_backward";
  return sdk::guard([&] {
    sdk::expect_arity(call, forward ? 2 : 1, forward ? 1 : 2, 0, 0, op);
    const FrTensor &a = forward ? call->in[0] : call->out[0], &b = forward ? call->in[1] : call->out[1],
                   &y = forward ? call->out[0] : call->in[0];
    const sdk::ConcatShape s = sdk::concat_shape(a, b, y, op);
    expect_same_dtype(call, y.dtype, op);
    with_float_type(y.dtype, op, [&](auto tag) {
      using T = decltype(tag);
      concat_kernel<T>
          <<<grid_for(s.rows * (s.ca + s.cb), 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
              static_cast<const T*>(a.data), static_cast<const T*>(b.data), static_cast<T*>(y.data), s,
              !forward);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}
}  // namespace

FR_CUDA_KERNEL_RUN(concat) {
  return run_concat(ctx, call, true);
}
FR_CUDA_KERNEL_RUN(concat_backward) {
  return run_concat(ctx, call, false);
}

}  // namespace fresco::cuda
