// CUDA batchnorm backward (training mode) with the CPU kernel's formula (batchnorm_backward.cpp) on f32,
// f16 or bf16 maps: dbeta = sum(dy), dgamma = sum(dy * (x - mean)) * invstd, dx = a (dy - dbeta / n -
// (x - mean) k) with a = gamma invstd and k = dgamma invstd / n. The sums are per-channel double sums
// (ops/channel_sums.cuh: coalesced and deterministic), one block per channel finalizes them, and an
// element-wise pass writes dx (dx may alias dy). dgamma and dbeta are f32. With params.relu (a fused relu) a
// sixth input y masks the incoming gradient: dy * (y > 0); given a seventh, beta, the mask is recomputed from
// x with the forward's scale and shift instead (ops/batchnorm_relu_mask.cuh: the same bits, one map fewer
// read in each of the two passes). Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel),
// test_cuda_low_precision.cpp (recomputed mask = read mask). Without a fused relu a sixth input may be gsums,
// the two sums the masking pass that wrote dy computed (ops/masked_grad_sums.h): then only the element-wise
// pass runs. With Context::bn_resident_backward the sums, finalize and dx pass may run as one cooperative
// kernel with the same bits (ops/bn_resident.h).
#include <type_traits>
#include <utility>

#include "fresco/batchnorm_rules.h"
#include "fresco/grad_sums_checks.hpp"
#include "ops/batchnorm_backward.cuh"
#include "ops/batchnorm_relu_mask.cuh"
#include "ops/bn_dx.h"
#include "ops/bn_resident.h"
#include "ops/channel_moments.h"
#include "ops/channel_sums.cuh"
#include "ops/dependent_launch.cuh"

namespace fresco::cuda {

namespace {
// dy at element i (channel ch), masked by the fused relu where there is one.
template <int M, class T>
__device__ __forceinline__ float grad_at(const T* dy, const T* x, const ReluMask<T>& m, int64_t i,
                                         int64_t ch) {
  if constexpr (M == kRecomputeMask) {
    const float2 ss = bn_scale_shift(m.gamma[ch], m.beta[ch], m.mean[ch], m.invstd[ch]);
    if (!bn_relu_passes<T>(to_f(x[i]), ss.x, ss.y)) return 0.0f;
  } else if constexpr (M == kReadMask) {
    if (!(to_f(m.y[i]) > 0.0f)) return 0.0f;
  }
  return to_f(dy[i]);
}

template <class T, int M>
__global__ void bn_grad_sums_kernel(const T* dy, ReluMask<T> mask, const T* x, const float* mean,
                                    ChannelChunks k, double* part) {
  channel_partials(k, part, [&](int64_t r, int64_t c) {
    return grad_terms(grad_at<M>(dy, x, mask, r * k.c + c, c), to_f(x[r * k.c + c]), mean[c]);
  });
}

// At least 4 blocks per SM (at most 64 registers; the recomputed-mask form took 72, so 3 blocks): ncu on
// ResNet-18 bf16, 536 -> 471 us per step, 2.35 -> 2.70 TB/s. The same bound on bn_dx_vec_kernel gained
// nothing.
template <class T, int M>
__global__ void __launch_bounds__(kVecThreads, 4)
    bn_grad_sums_vec_kernel(const T* dy, ReluMask<T> mask, const T* x, const float* mean, ChannelChunks k,
                            double* part) {
  constexpr int V = Vec16<T>::kN;
  using Acc = GradAcc<T>;  // (channel_sums.cuh)
  Acc mu[V];
  thread_channel_means<T>(k, mean, mu);
  const int cv0 = static_cast<int>(threadIdx.x % (k.c / V));
  float scale[V], shift[V];
  if constexpr (M == kRecomputeMask) mask.coefficients(static_cast<int64_t>(cv0) * V, scale, shift);
  vector_channel_partials<T, Acc>(k, part, [&](int64_t r, int cv, Acc(&a)[V], Acc(&b)[V]) {
    const int64_t i = r * (k.c / V) + cv;
    const Vec16<T> g = load16(dy, i), xv = load16(x, i);
    Vec16<T> yv;
    if constexpr (M == kReadMask) yv = load16(mask.y, i);
    add_grad_vector<M>(g, xv, yv, scale, shift, mu, a, b);
  });
}

template <int kCh>
__global__ void bn_grad_finalize_kernel(ChannelChunks k, const double* part, const float* gamma,
                                        const float* invstd, float* dgamma, float* dbeta, float* coef) {
  wait_for_prior_kernels();  // (a programmatic dependent of the sums pass: Context::bn_grad_dependent_launch)
  allow_dependent_launch();  // the dx pass may wait beside it (level 2)
  const int64_t c0 = finalize_first_channel<kCh>();
  const double2 t = channel_totals<kCh>(k, part, c0);
  const int64_t c = finalize_owner<kCh>(k, c0);
  if (c < 0) return;
  write_grad_coefficients(k, c, t, gamma, invstd, dgamma, dbeta, coef);
}

// The same from the gradient sums the masking pass handed over (gsums, f32 [2C]; ops.h), one thread per
// channel.
__global__ void bn_grad_given_sums_kernel(ChannelChunks k, const float* gsums, const float* gamma,
                                          const float* invstd, float* dgamma, float* dbeta, float* coef) {
  wait_for_prior_kernels();  // (a programmatic dependent of the kernel before it, as above)
  allow_dependent_launch();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= k.c) return;
  write_grad_coefficients(k, c, make_double2(gsums[c], gsums[k.c + c]), gamma, invstd, dgamma, dbeta, coef);
}

template <class T, int M>
__global__ void bn_dx_kernel(const T* dy, ReluMask<T> mask, const T* x, const float* mean, const float* coef,
                             T* dx, int64_t total, int64_t c) {
  wait_for_prior_kernels();  // (a programmatic dependent of the coefficients at level 2)
  FR_CUDA_GRID_LOOP(i, total) {
    const int64_t ch = i % c;
    dx[i] = from_f<T>(fr_bn_dx_value(grad_at<M>(dy, x, mask, i, ch), to_f(x[i]), mean[ch], coef[ch],
                                     coef[c + ch], coef[2 * c + ch]));
  }
}

// The same, 16 bytes per load, each thread on fixed channels with its coefficients in registers
// (fixed_channels_fit).
template <class T, int M>
__global__ void __launch_bounds__(kFixedThreads)
    bn_dx_vec_kernel(const T* dy, ReluMask<T> mask, const T* x, const float* mean, const float* coef, T* dx,
                     int64_t nvec, int64_t c) {
  constexpr int V = Vec16<T>::kN;
  const int64_t ch = fixed_channel_base<T>(c), stride = static_cast<int64_t>(gridDim.x) * kFixedThreads;
  wait_for_prior_kernels();  // (a programmatic dependent of the coefficients at level 2)
  float ca[V], cb[V], ck[V], mu[V];
  load_channels(coef, ch, ca);
  load_channels(coef, c + ch, cb);
  load_channels(coef, 2 * c + ch, ck);
  load_channels(mean, ch, mu);
  float scale[V], shift[V];
  if constexpr (M == kRecomputeMask) mask.coefficients(ch, scale, shift);
#pragma unroll 2
  for (int64_t i = fixed_first_vector<T>(); i < nvec; i += stride) {
    Vec16<T> g = load16(dy, i);
    const Vec16<T> xv = load16(x, i);
    Vec16<T> yv;
    if constexpr (M == kReadMask) yv = load16(mask.y, i);
    bn_dx_vector<M>(g, xv, yv, scale, shift, mu, ca, cb, ck);
    store16(dx, i, g);
  }
  allow_dependent_launch();  // a small memset kernel after it may wait beside the tail (memset_nodes.h)
}

// f(std::integral_constant<int, mode>) for the runtime mask mode.
template <class F>
void with_mask_mode(int mode, F&& f) {
  if (mode == kRecomputeMask)
    f(std::integral_constant<int, kRecomputeMask>{});
  else if (mode == kReadMask)
    f(std::integral_constant<int, kReadMask>{});
  else
    f(std::integral_constant<int, kNoMask>{});
}

// Launches kernel<<<grid, block>>>(args...) on s, as a programmatic dependent of the kernel before it where
// ctx's bn_grad_dependent_launch reaches `level` (Context).
template <class... P, class... A>
void launch_grad(const Context* ctx, int level, void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t s,
                 A&&... args) {
  launch_after_prior(grad_dependent(ctx, level), kernel, grid, block, s, std::forward<A>(args)...);
}

// dx = the element-wise pass over `total` values (coef: a, b, k per channel), 16 bytes per load where the
// channels and pointers allow (bn_dx_vec_kernel), else one value per thread.
template <class T, int M>
void launch_dx(const Context* ctx, const T* dy, const ReluMask<T>& mask, const T* x, const float* mean,
               const float* coef, T* dx, int64_t total, int64_t c, cudaStream_t s) {
  if (fixed_channels_fit<T>(c) && vectorizable<T>(total, {dy, x, dx, mask.y ? mask.y : dy, coef, mean,
                                                          mask.gamma, mask.beta, mask.invstd})) {
    const int64_t nv = total / Vec16<T>::kN;
    launch_grad(ctx, 2, bn_dx_vec_kernel<T, M>, dim3(grid_for(nv, kFixedThreads, ctx->sm_count)),
                dim3(kFixedThreads), s, dy, mask, x, mean, coef, dx, nv, c);
  } else {
    launch_grad(ctx, 2, bn_dx_kernel<T, M>, dim3(grid_for(total, 256, ctx->sm_count)), dim3(256), s, dy, mask,
                x, mean, coef, dx, total, c);
  }
}

// The coefficients from the gradient sums the masking pass handed over.
void launch_given_sums(const Context* ctx, const ChannelChunks& k, const float* gsums, const float* gamma,
                       const float* invstd, float* dgamma, float* dbeta, float* coef, cudaStream_t s) {
  launch_grad(ctx, 1, bn_grad_given_sums_kernel, dim3(static_cast<unsigned>((k.c + 255) / 256)), dim3(256), s,
              k, gsums, gamma, invstd, dgamma, dbeta, coef);
}

void check_vec(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c && t.dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm_backward: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements or is not f32, expected C = " + std::to_string(c) + " floats");
}

ChannelChunks geometry(const FrCall* call) {
  const bool relu = call->params && sdk::params<FrBatchNormParams>(call).relu;
  sdk::expect_arity(call, relu ? 6 : 5, 2, 0, 0, "batchnorm_backward");
  const bool dx = sdk::bn_backward_dgamma_index(call) == 1;  // else the weights-only form (ops.h)
  const FrTensor& xt = call->in[1];
  FR_PLUGIN_CHECK(xt.ndim >= 1 && xt.ndim <= 4, FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: bad ndim");
  const int64_t c = xt.dims[xt.ndim - 1];
  FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: no channels");
  const int64_t n = sdk::numel(xt);
  FR_PLUGIN_CHECK(sdk::numel(call->in[0]) == n && (!dx || sdk::numel(call->out[0]) == n),
                  FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: dy, x and dx sizes differ");
  FR_PLUGIN_CHECK(call->in[0].dtype == xt.dtype && (!dx || call->out[0].dtype == xt.dtype),
                  FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: dy, x and dx dtypes differ");
  FR_PLUGIN_CHECK(!relu || (sdk::numel(call->in[5]) == n && call->in[5].dtype == xt.dtype),
                  FR_ERR_INVALID_ARGUMENT,
                  "batchnorm_backward: the fused relu's y differs from x in size or dtype");
  return channel_chunks(n / c, c);
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(batchnorm_backward) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] { *workspace_bytes = channel_workspace_bytes(geometry(call)); });
}

FR_CUDA_KERNEL_RUN(batchnorm_backward) {
  return sdk::guard([&] {
    const ChannelChunks k = geometry(call);
    const int64_t c = k.c, total = k.rows * k.c;
    const bool relu = call->params && sdk::params<FrBatchNormParams>(call).relu;
    check_vec(call->in[2], c, "gamma");
    check_vec(call->in[3], c, "save_mean");
    check_vec(call->in[4], c, "save_invstd");
    const uint32_t gi = sdk::bn_backward_dgamma_index(call);  // 0: the weights-only form, no dx
    check_vec(call->out[gi], c, "dgamma");
    check_vec(call->out[gi + 1], c, "dbeta");
    FR_PLUGIN_CHECK(call->workspace && call->workspace_bytes >= channel_workspace_bytes(k),
                    FR_ERR_INVALID_ARGUMENT,
                    "batchnorm_backward: run without the workspace asked by prepare");
    const float* given = sdk::bn_grad_sums_input(call, c);  // gsums (ops.h, "Gradient sums")
    double* part = partials_of(call->workspace);
    float* coef = coefficients_of(call->workspace, k);
    const float* mean = sdk::data<float>(call->in[3]);
    cudaStream_t st = stream_of(call);
    const Context* cx = ctx_of(ctx);
    with_float_type(call->in[1].dtype, "batchnorm_backward", [&](auto tag) {
      using T = decltype(tag);
      const T *dy = sdk::data<T>(call->in[0]), *x = sdk::data<T>(call->in[1]);
      ReluMask<T> mask;
      int mode = kNoMask;
      if (relu) {
        mask.y = sdk::data<T>(call->in[5]);
        mode = kReadMask;
        if (call->n_in >= 7 && cx->bn_recompute_mask) {  // beta: recompute the mask from x
          check_vec(call->in[6], c, "beta");
          mask.gamma = sdk::data<float>(call->in[2]);
          mask.beta = sdk::data<float>(call->in[6]);
          mask.mean = mean;
          mask.invstd = sdk::data<float>(call->in[4]);
          mode = kRecomputeMask;
        }
      }
      const T* relu_y = mask.y;
      T* dx = gi == 1 ? sdk::data<T>(call->out[0]) : nullptr;
      with_mask_mode(mode, [&](auto m) {
        constexpr int M = decltype(m)::value;
        const float *gamma = sdk::data<float>(call->in[2]), *invstd = sdk::data<float>(call->in[4]);
        float *dgamma = sdk::data<float>(call->out[gi]), *dbeta = sdk::data<float>(call->out[gi + 1]);
        if (given) {  // the sums from the pass that wrote dy
          launch_given_sums(cx, k, given, gamma, invstd, dgamma, dbeta, coef, st);
        } else {
          if constexpr (M != kReadMask) {  // sums, finalize and dx in one cooperative kernel where allowed
            const BnResidentGradCall one{call->in[1].dtype, dy,   x,      relu_y, dx,   k, part, coef, gamma,
                                         mask.beta,         mean, invstd, dgamma, dbeta};
            if (launch_bn_resident_backward(cx, one, st)) return;
          }
          if (vector_partials_fit<T>(k,
                                     {dy, x, relu_y ? relu_y : dy, mean, mask.gamma, mask.beta, mask.invstd}))
            bn_grad_sums_vec_kernel<T, M>
                <<<static_cast<unsigned>(k.chunks), kVecThreads, 0, st>>>(dy, mask, x, mean, k, part);
          else
            bn_grad_sums_kernel<T, M>
                <<<partial_grid(k), dim3(kChanLanes, kRowLanes), 0, st>>>(dy, mask, x, mean, k, part);
          with_finalize_channels(cx->grad_finalize_channels, [&](auto ch) {
            constexpr int kCh = decltype(ch)::value;
            launch_grad(cx, 1, bn_grad_finalize_kernel<kCh>, dim3(finalize_blocks<kCh>(c)),
                        dim3(kFinalizeThreads), st, k, part, gamma, invstd, dgamma, dbeta, coef);
          });
        }
        if (!dx) return;  // the weights-only form: the conv's weight gradient applies dx
        launch_dx<T, M>(cx, dy, mask, x, mean, coef, dx, total, c, st);
      });
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

void launch_bn_dx_given_sums(const Context* ctx, uint32_t dtype, const void* g, const void* x,
                             const float* gamma, const float* mean, const float* invstd, const float* gsums,
                             int64_t rows, int64_t c, float* coef, void* dx, cudaStream_t s) {
  const ChannelChunks k = channel_chunks(rows, c);
  launch_given_sums(ctx, k, gsums, gamma, invstd, nullptr, nullptr, coef, s);
  with_float_type(dtype, "batchnorm dx", [&](auto tag) {
    using T = decltype(tag);
    launch_dx<T, kNoMask>(ctx, static_cast<const T*>(g), ReluMask<T>{}, static_cast<const T*>(x), mean, coef,
                          static_cast<T*>(dx), rows * c, c, s);
  });
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
