// CUDA input normalisation: uint8 NHWC -> f32, f16 or bf16 (computed in float), y = (x / 255 - mean[c]) /
// std[c]; optionally copies the batch's labels in the same kernel (one graph node instead of two). Test:
// tests/plugins/cuda.
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
template <class T>
__global__ void normalize_kernel(const uint8_t* __restrict__ x, T* __restrict__ y, int64_t n,
                                 FrNormalizeParams p, const int32_t* __restrict__ labels_in,
                                 int32_t* __restrict__ labels_out, int64_t n_labels) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < n_labels; i += stride) labels_out[i] = labels_in[i];
  for (int64_t i = first; i < n; i += stride) {
    const int c = static_cast<int>(i % p.channels);
    y[i] = from_f<T>((static_cast<float>(x[i]) / 255.0f - p.mean[c]) / p.std[c]);
  }
}
}  // namespace

FR_CUDA_KERNEL_RUN(normalize_input) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 1, 1, 0, 0, "normalize_input");
    const auto& p = sdk::params<FrNormalizeParams>(call);
    const auto& xt = call->in[0];
    FR_PLUGIN_CHECK(xt.dtype == FR_U8, FR_ERR_INVALID_ARGUMENT, "normalize_input: x must be u8");
    FR_PLUGIN_CHECK(p.channels >= 1 && p.channels <= FR_MAX_NORM_CHANNELS && xt.dims[3] == p.channels,
                    FR_ERR_INVALID_ARGUMENT, "normalize_input: channel count mismatch");
    const int64_t n = sdk::numel(xt);
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "normalize_input: sizes differ");
    const int32_t* labels_in = nullptr;
    int32_t* labels_out = nullptr;
    int64_t n_labels = 0;
    if (call->n_in >= 2 && call->n_out >= 2) {
      FR_PLUGIN_CHECK(call->in[1].dtype == FR_I32 && call->out[1].dtype == FR_I32, FR_ERR_INVALID_ARGUMENT,
                      "normalize_input: labels must be i32");
      n_labels = sdk::numel(call->in[1]);
      FR_PLUGIN_CHECK(sdk::numel(call->out[1]) == n_labels, FR_ERR_INVALID_ARGUMENT,
                      "normalize_input: label sizes differ");
      labels_in = sdk::data<int32_t>(call->in[1]);
      labels_out = sdk::data<int32_t>(call->out[1]);
    }
    with_float_type(call->out[0].dtype, "normalize_input", [&](auto tag) {
      using T = decltype(tag);
      normalize_kernel<T><<<grid_for(n, 256, ctx_of(ctx)->sm_count), 256, 0, stream_of(call)>>>(
          sdk::data<uint8_t>(xt), sdk::data<T>(call->out[0]), n, p, labels_in, labels_out, n_labels);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
