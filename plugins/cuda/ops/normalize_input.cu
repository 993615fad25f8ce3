// CUDA input normalisation: uint8 NHWC -> f32, f16 or bf16 (computed in float), y = (x / 255 - mean[c]) /
// std[c]; optionally copies the batch's labels in the same kernel (one graph node instead of two). A batch
// holds fewer than 2^31 values (32-bit indices; a larger one is refused with an error). Test:
// tests/plugins/cuda.
#include <algorithm>

#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {
constexpr int kThreads = 256;

// Both kernels' prologue: the block tabulates the 256 x channels possible outputs in `table` with the
// arithmetic the CPU does per element (two IEEE divisions, so the bits agree and no element divides), and the
// grid copies the batch's labels. The caller waits for the block before reading the table.
__device__ __forceinline__ void build_table_copy_labels(float (&table)[FR_MAX_NORM_CHANNELS][256],
                                                        const FrNormalizeParams& p,
                                                        const int32_t* __restrict__ labels_in,
                                                        int32_t* __restrict__ labels_out, uint32_t n_labels) {
  for (uint32_t i = threadIdx.x; i < 256 * static_cast<uint32_t>(p.channels); i += kThreads) {
    const uint32_t c = i >> 8, v = i & 255;
    table[c][v] = (static_cast<float>(v) / 255.0f - p.mean[c]) / p.std[c];
  }
  const uint32_t stride = gridDim.x * kThreads;
  for (uint32_t i = blockIdx.x * kThreads + threadIdx.x; i < n_labels; i += stride)
    labels_out[i] = labels_in[i];
}

// Four consecutive elements per thread (one 4-byte load of x), 32-bit indices: the channel is found once per
// four elements, the value from the block's table.
template <class T>
__global__ void __launch_bounds__(kThreads)
    normalize_kernel(const uint8_t* __restrict__ x, T* __restrict__ y, uint32_t n, FrNormalizeParams p,
                     const int32_t* __restrict__ labels_in, int32_t* __restrict__ labels_out,
                     uint32_t n_labels, bool x_aligned4) {
  __shared__ float table[FR_MAX_NORM_CHANNELS][256];
  const uint32_t channels = static_cast<uint32_t>(p.channels);
  const uint32_t stride = gridDim.x * kThreads;
  const uint32_t first = blockIdx.x * kThreads + threadIdx.x;
  build_table_copy_labels(table, p, labels_in, labels_out, n_labels);
  __syncthreads();
  for (uint32_t q = first; q < (n + 3) / 4; q += stride) {
    const uint32_t i0 = 4 * q;
    uint8_t v[4];
    if (x_aligned4 && i0 + 4 <= n) {
      const uchar4 u = *reinterpret_cast<const uchar4*>(x + i0);
      v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w;
    } else {
      for (uint32_t j = 0; j < 4; ++j) v[j] = i0 + j < n ? x[i0 + j] : 0;
    }
    uint32_t c = i0 % channels;
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) {
      if (i0 + j < n) y[i0 + j] = from_f<T>(table[c][v[j]]);
      c = c + 1 == channels ? 0 : c + 1;
    }
  }
}

// The same table and outputs for pointers aligned to 16 bytes: sixteen elements per thread (one 16-byte load,
// issued before the block builds its table so the two overlap, and 16-byte stores), the n % 16 last elements
// one per thread. Fewer, wider memory operations than normalize_kernel: the pass is latency-bound, and it is
// the first node of a training step.
template <class T>
__global__ void __launch_bounds__(kThreads)
    normalize16_kernel(const uint8_t* __restrict__ x, T* __restrict__ y, uint32_t n, FrNormalizeParams p,
                       const int32_t* __restrict__ labels_in, int32_t* __restrict__ labels_out,
                       uint32_t n_labels) {
  __shared__ float table[FR_MAX_NORM_CHANNELS][256];
  const uint32_t channels = static_cast<uint32_t>(p.channels);
  const uint32_t chunks = n / 16;
  const uint32_t stride = gridDim.x * kThreads;
  const uint32_t first = blockIdx.x * kThreads + threadIdx.x;
  uint4 u = make_uint4(0, 0, 0, 0);
  if (first < chunks) u = reinterpret_cast<const uint4*>(x)[first];
  build_table_copy_labels(table, p, labels_in, labels_out, n_labels);
  __syncthreads();
  for (uint32_t q = first; q < chunks; q += stride) {
    if (q != first) u = reinterpret_cast<const uint4*>(x)[q];
    uint8_t v[16];
    memcpy(v, &u, sizeof v);
    T out[16];
    uint32_t c = (16 * q) % channels;
#pragma unroll
    for (uint32_t j = 0; j < 16; ++j) {
      out[j] = from_f<T>(table[c][v[j]]);
      c = c + 1 == channels ? 0 : c + 1;
    }
    constexpr int kVectors = static_cast<int>(sizeof out / sizeof(uint4));
    uint4 packed[kVectors];
    memcpy(packed, out, sizeof out);
    uint4* dst = reinterpret_cast<uint4*>(y + 16 * static_cast<size_t>(q));
#pragma unroll
    for (int k = 0; k < kVectors; ++k) dst[k] = packed[k];
  }
  for (uint32_t i = 16 * chunks + first; i < n; i += stride) y[i] = from_f<T>(table[i % channels][x[i]]);
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
    FR_PLUGIN_CHECK(n < (int64_t{1} << 31), FR_ERR_INVALID_ARGUMENT,
                    "normalize_input: a batch of " + std::to_string(n) + " values is over the 2^31 limit");
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
      const auto* x = sdk::data<uint8_t>(xt);
      T* y = sdk::data<T>(call->out[0]);
      const int sms = ctx_of(ctx)->sm_count;
      if (((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15u) == 0) {
        const int64_t work = std::max<int64_t>(std::max<int64_t>(n / 16, n % 16), n_labels);
        normalize16_kernel<T><<<grid_for(work, kThreads, sms), kThreads, 0, stream_of(call)>>>(
            x, y, static_cast<uint32_t>(n), p, labels_in, labels_out, static_cast<uint32_t>(n_labels));
      } else {
        const int64_t work = std::max<int64_t>((n + 3) / 4, n_labels);
        normalize_kernel<T><<<grid_for(work, kThreads, sms), kThreads, 0, stream_of(call)>>>(
            x, y, static_cast<uint32_t>(n), p, labels_in, labels_out, static_cast<uint32_t>(n_labels),
            (reinterpret_cast<uintptr_t>(x) & 3u) == 0);
      }
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
