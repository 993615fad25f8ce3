// Per-channel sums of x and x^2 (channel_moments.h).
#include "ops/channel_moments.h"

#include <type_traits>

#include "ops/channel_sums.cuh"
#include "ops/dependent_launch.cuh"

namespace fresco::cuda {

namespace {
template <class T>
__global__ void moments_kernel(const T* x, ChannelChunks k, double* part) {
  channel_partials(k, part, [&](int64_t r, int64_t c) {
    const double v = to_f(x[r * k.c + c]);
    return make_double2(v, v * v);
  });
}

// Per-thread sums in float for 16-bit maps (a thread adds at most rows_per_chunk / lanes values of 8-11
// significant bits; ResNet-18 bf16: 337 -> 316 us per step), in double for f32 maps.
template <class T>
__global__ void __launch_bounds__(kVecThreads) moments_vec_kernel(const T* x, ChannelChunks k, double* part) {
  allow_dependent_launch();  // a batchnorm's finalize may wait beside it (batchnorm.cu)
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, float>;
  vector_channel_partials<T, Acc>(k, part,
                                  [&](int64_t r, int cv, Acc(&a)[Vec16<T>::kN], Acc(&b)[Vec16<T>::kN]) {
                                    const Vec16<T> v = load16(x, r * (k.c / Vec16<T>::kN) + cv);
#pragma unroll
                                    for (int j = 0; j < Vec16<T>::kN; ++j) {
                                      const Acc f = to_f(v.v[j]);
                                      a[j] += f;
                                      b[j] += f * f;
                                    }
                                  });
}

// Up to two finalizes of the same shape in one launch (blockIdx.y picks one): a projection join's masking
// pass hands two batchnorms their sums.
struct FinalizeTargets {
  const double* part[2];
  float* sums[2];
};

template <int kCh>
__global__ void sums_finalize_kernel(ChannelChunks k, FinalizeTargets o) {
  wait_for_prior_kernels();  // (launched as a dependent of the partials pass:
                             // Context::bn_grad_dependent_launch)
  allow_dependent_launch();  // a batchnorm's finalize from these sums may wait beside it (batchnorm.cu)
  const double* part = o.part[blockIdx.y];
  float* sums = o.sums[blockIdx.y];
  const int64_t c0 = finalize_first_channel<kCh>();
  const double2 t = channel_totals<kCh>(k, part, c0);
  const int64_t c = finalize_owner<kCh>(k, c0);
  if (c < 0) return;
  sums[c] = static_cast<float>(t.x);
  sums[k.c + c] = static_cast<float>(t.y);
}
}  // namespace

void launch_channel_moments(uint32_t dtype, const void* x, int64_t rows, int64_t c, double* part,
                            cudaStream_t s) {
  const ChannelChunks k = channel_chunks(rows, c);
  with_float_type(dtype, "channel sums", [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    if (vector_partials_fit<T>(k, {x}))
      moments_vec_kernel<T><<<static_cast<unsigned>(k.chunks), kVecThreads, 0, s>>>(xt, k, part);
    else
      moments_kernel<T><<<partial_grid(k), dim3(kChanLanes, kRowLanes), 0, s>>>(xt, k, part);
  });
  FR_CUDA_LAUNCH_CHECK();
}

uint64_t conv_sums_workspace(int64_t rows, int64_t c) {
  const ChannelChunks k = channel_chunks(rows, c);
  return static_cast<uint64_t>(k.chunks * k.c) * 2 * sizeof(double);
}

void launch_conv_sums(const Context* ctx, uint32_t dtype, const void* y, int64_t rows, int64_t c, void* ws,
                      float* sums, cudaStream_t s) {
  const ChannelChunks k = channel_chunks(rows, c);
  launch_channel_moments(dtype, y, rows, c, partials_of(ws), s);
  launch_sums_finalize(ctx, k.chunks, c, partials_of(ws), sums, s);
}

void launch_sums_finalize(const Context* ctx, int64_t chunks, int64_t c, const double* const* part,
                          float* const* sums, int n, cudaStream_t s) {
  FR_PLUGIN_CHECK(n >= 1 && n <= 2, FR_ERR_INVALID_ARGUMENT, "sums finalize: 1 or 2 targets");
  const ChannelChunks k{0, c, 0, chunks};  // the totals read only c and chunks
  FinalizeTargets o{{part[0], part[n - 1]}, {sums[0], sums[n - 1]}};
  with_finalize_channels(ctx ? ctx->grad_finalize_channels : kFinalizeChannels, [&](auto ch) {
    constexpr int kCh = decltype(ch)::value;
    launch_after_prior(grad_dependent(ctx), sums_finalize_kernel<kCh>,
                       dim3(finalize_blocks<kCh>(c), static_cast<unsigned>(n)), dim3(kFinalizeThreads), s, k,
                       o);
  });
  FR_CUDA_LAUNCH_CHECK();
}

void launch_sums_finalize(const Context* ctx, int64_t chunks, int64_t c, const double* part, float* sums,
                          cudaStream_t s) {
  launch_sums_finalize(ctx, chunks, c, &part, &sums, 1, s);
}

}  // namespace fresco::cuda
