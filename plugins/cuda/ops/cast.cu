// CUDA casts between f32, f16 and bf16 (ops.h): `cast` converts one tensor (mixed precision's boundary
// between low-precision maps and fp32 layers), `cast_range` a whole region range in one kernel (W -> A
// weights, G16 -> G gradients). Rounding to nearest even; NaN and inf are kept. Test:
// tests/plugins/cuda/test_cuda_ops.cpp.
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
template <class S, class D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  FR_CUDA_GRID_LOOP(i, n) y[i] = from_f<D>(to_f(x[i]));
}

void launch_cast(void* ctx, const void* x, uint32_t xt, void* y, uint32_t yt, int64_t n, cudaStream_t s,
                 const char* op) {
  with_float_type(xt, op, [&](auto src) {
    with_float_type(yt, op, [&](auto dst) {
      using S = decltype(src);
      using D = decltype(dst);
      cast_kernel<S, D><<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, s>>>(static_cast<const S*>(x),
                                                                                static_cast<D*>(y), n);
    });
  });
  FR_CUDA_LAUNCH_CHECK();
}
}  // namespace

FR_CUDA_KERNEL_RUN(cast) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "cast");
    const int64_t n = sdk::numel(call->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "cast: x and y sizes differ");
    launch_cast(ctx, call->in[0].data, call->in[0].dtype, call->out[0].data, call->out[0].dtype, n,
                stream_of(call), "cast");
  });
}

FR_CUDA_KERNEL_RUN(cast_range) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 1, 1, "cast_range");
    const FrRange &src = call->rin[0], &dst = call->rout[0];
    const int64_t n = sdk::cast_elements(src, dst, "cast_range");
    if (n == 0) return;
    launch_cast(ctx, src.data, src.dtype, dst.data, dst.dtype, n, stream_of(call), "cast_range");
  });
}

}  // namespace fresco::cuda
