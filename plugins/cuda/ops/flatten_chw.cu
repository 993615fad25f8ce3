// CUDA flatten_chw: x [N,H,W,C] -> y [N,1,1,C*H*W] in PyTorch's C,H,W order, and the inverse for the
// backward; one thread per element (a per-sample transpose). Out of place. Test: test_cuda_ops.cpp.
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
// dst[b][j][i] = src[b][i][j] for per-sample [rows, cols] matrices.
template <class T>
__global__ void transpose_kernel(const T* src, T* dst, int64_t n, int64_t rows, int64_t cols) {
  const int64_t total = n * rows * cols;
  FR_CUDA_GRID_LOOP(t, total) {
    const int64_t j = t % cols, i = (t / cols) % rows, b = t / (cols * rows);
    dst[(b * cols + j) * rows + i] = src[t];
  }
}

FrError* run_flatten(void* ctx, const FrCall* call, bool forward) noexcept {
  const char* op = forward ? "flatten_chw" : "flatten_chw_backward";
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, op);
    const FrTensor& map = forward ? call->in[0] : call->out[0];
    const FrTensor& flat = forward ? call->out[0] : call->in[0];
    const std::string o(op);
    FR_PLUGIN_CHECK(map.ndim == 4, FR_ERR_INVALID_ARGUMENT, o + ": the map must be 4-D NHWC");
    const int64_t n = map.dims[0], hw = map.dims[1] * map.dims[2], c = map.dims[3];
    FR_PLUGIN_CHECK(flat.dims[0] == n && sdk::numel(flat) == sdk::numel(map), FR_ERR_INVALID_ARGUMENT,
                    o + ": flat tensor must be [N, C*H*W]");
    FR_PLUGIN_CHECK(call->in[0].data != call->out[0].data || hw == 1 || c == 1, FR_ERR_INVALID_ARGUMENT,
                    o + ": output must not alias the input");
    expect_same_dtype(call, call->out[0].dtype, op);
    with_float_type(call->out[0].dtype, op, [&](auto tag) {
      using T = decltype(tag);
      transpose_kernel<T><<<grid_for(n * hw * c, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
          sdk::data<T>(call->in[0]), sdk::data<T>(call->out[0]), n, forward ? hw : c, forward ? c : hw);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}
}  // namespace

FR_CUDA_KERNEL_RUN(flatten_chw) {
  return run_flatten(ctx, call, true);
}
FR_CUDA_KERNEL_RUN(flatten_chw_backward) {
  return run_flatten(ctx, call, false);
}

}  // namespace fresco::cuda
