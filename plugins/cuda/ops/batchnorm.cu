// CUDA batchnorm forward with the CPU kernel's semantics (plugins/cpu/ops/batchnorm.cpp, PyTorch
// BatchNorm2d) on f32, f16 or bf16 maps (statistics, gamma, beta and running statistics stay f32).
// Training: per-channel sums of x and x^2 (ops/channel_moments.h: coalesced, deterministic, chunk sums in
// double; or the
// f32 sums of the conv that wrote x, a fourth input, batchnorm_add's fifth: ops.h), then
// one block per channel turns them into the batch mean (kept in float, as the backward sees it), the biased
// variance, save_mean/save_invstd, the running statistics (momentum, unbiased variance) and a scale/shift
// pair from the saved float statistics (ops/batchnorm_relu_mask.cuh), and a last element-wise pass writes
// y = fma(x, scale, shift) (y may alias x; max(y, 0) with the fused relu of params.relu). Inference: one
// element-wise pass with the running statistics. The statistics-only form (two outputs, ops.h: a conv2d's
// batchnorm prologue applies it) stops before the element-wise pass. run_batchnorm also serves batchnorm_add
// (ops/batchnorm_add.cpp), whose element-wise pass adds the residual before the relu (and may write y's even
// rows and columns to a subsampled output: ops.h). With
// Context::bn_resident the three training kernels may run as one cooperative kernel with the same bits
// (ops/bn_resident.h). Test:
// tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include <cmath>

#include "fresco/batchnorm_rules.h"
#include "fresco/conv_prologue.hpp"
#include "fresco/conv_stats_checks.hpp"
#include "ops/batchnorm_finalize.cuh"
#include "ops/batchnorm_forward.h"
#include "ops/batchnorm_relu_mask.cuh"
#include "ops/bn_resident.h"
#include "ops/channel_moments.h"
#include "ops/channel_sums.cuh"
#include "ops/dependent_launch.cuh"
#include "ops/strided_rows.h"

namespace fresco::cuda {

namespace {
// The finalizes and the apply pass may run as programmatic dependents of the kernel before them
// (bn_dependent_launch below): each waits for it first, and each finalize lets its apply pass launch early.
// kCh channels per block (channel_totals; Context::bn_finalize_channels).
template <int kCh>
__global__ void bn_finalize_kernel(ChannelChunks k, const double* part, BnOutputs o, float* coef) {
  wait_for_prior_kernels();
  allow_dependent_launch();
  const int64_t c0 = finalize_first_channel<kCh>();
  const double2 t = channel_totals<kCh>(k, part, c0);
  const int64_t c = finalize_owner<kCh>(k, c0);
  if (c < 0) return;
  bn_finalize_totals(c, k.c, t, o, coef);
}

// From the sums, one thread per channel (for the apply kernels that read coef).
__global__ void bn_finalize_sums_kernel(int64_t channels, const float* sums, BnOutputs o, float* coef) {
  wait_for_prior_kernels();
  allow_dependent_launch();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  bn_finalize_totals(c, channels, make_double2(sums[c], sums[channels + c]), o, coef);
}

// batchnorm_add's subsampled output (ops.h): y's even rows and columns, or none (p null).
template <class T>
struct Subsample {
  T* p = nullptr;
  StridedRows rows;
};

template <class T>
__global__ void bn_apply_kernel(const T* x, const T* r, const float* coef, T* y, int64_t total, int64_t c,
                                int relu, Subsample<T> sub) {
  FR_CUDA_GRID_LOOP(i, total) {
    const int64_t ch = i % c;
    float v = bn_normalized(to_f(x[i]), coef[ch], coef[c + ch]);
    if (r) v += to_f(r[i]);
    const T out = from_f<T>(relu && !(v > 0.0f) ? 0.0f : v);
    y[i] = out;
    if (sub.p) {
      const int64_t s = sub.rows.row(i / c);
      if (s >= 0) sub.p[s * c + ch] = out;
    }
  }
}

// The same, 16 bytes per load, each thread on fixed channels with scale and shift in registers
// (fixed_channels_fit). (Deriving them from the conv's sums in every thread instead of a finalize launch was
// measured slower on the H200: eight double square roots and divisions per thread cost more than the launch.)
template <class T, bool Residual>
__global__ void __launch_bounds__(kFixedThreads)
    bn_apply_vec_kernel(const T* x, const T* r, const float* coef, T* y, int64_t nvec, int64_t c, int relu,
                        Subsample<T> sub) {
  wait_for_prior_kernels();
  constexpr int V = Vec16<T>::kN;
  const int64_t ch = fixed_channel_base<T>(c), stride = static_cast<int64_t>(gridDim.x) * kFixedThreads;
  float scale[V], shift[V];
  load_channels(coef, ch, scale);
  load_channels(coef, c + ch, shift);
  // The subsample's row of vector i: the stride is a whole number of rows (fixed_channels_fit), so the
  // thread's row advances by a fixed count and its vector within the row stays ch / V, no division a vector.
  const int64_t cv = c / V, cq = ch / V, dq = fixed_row_stride<T>(c);
  int64_t q = fixed_first_row<T>(c);
#pragma unroll 4
  for (int64_t i = fixed_first_vector<T>(); i < nvec; i += stride, q += dq) {
    Vec16<T> a = load16(x, i);
    Vec16<T> b;
    if constexpr (Residual) b = load16(r, i);
    bn_apply_vector<T, Residual>(a, b, scale, shift, relu);
    store16(y, i, a);
    if (sub.p) {
      const int64_t s = sub.rows.row(q);
      if (s >= 0) store16(sub.p, s * cv + cq, a);
    }
  }
  allow_dependent_launch();  // a small memset kernel after it may wait beside the tail (memset_nodes.h)
}

template <class T>
__global__ void bn_infer_kernel(const T* x, const float* gamma, const float* beta, const float* rm,
                                const float* rv, T* y, int64_t total, int64_t c, float eps, int relu) {
  FR_CUDA_GRID_LOOP(i, total) {
    const int64_t k = i % c;
    const float scale = static_cast<float>(gamma[k] / sqrt(static_cast<double>(rv[k]) + eps));
    const float v = (to_f(x[i]) - rm[k]) * scale + beta[k];
    y[i] = from_f<T>(relu && !(v > 0.0f) ? 0.0f : v);
  }
}

void check_vec(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c && t.dtype == FR_F32, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements or is not f32, expected C = " + std::to_string(c) + " floats");
}

// rows and channels of the call's x, with the checks every mode shares.
ChannelChunks geometry(const FrCall* call) {
  const auto& p = sdk::params<FrBatchNormParams>(call);
  if (p.training)
    sdk::expect_arity(call, 3, 2, 0, 2, "batchnorm (training)");
  else
    sdk::expect_arity(call, 5, 1, 0, 0, "batchnorm (inference)");
  const FrTensor& xt = call->in[0];
  FR_PLUGIN_CHECK(xt.ndim >= 1 && xt.ndim <= 4, FR_ERR_INVALID_ARGUMENT, "batchnorm: bad ndim");
  const int64_t c = xt.dims[xt.ndim - 1];
  FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, "batchnorm: no channels");
  const bool stats_only = p.training && sdk::bn_statistics_index(call) == 0;  // the training form's outputs
  FR_PLUGIN_CHECK(
      stats_only || (sdk::numel(call->out[0]) == sdk::numel(xt) && call->out[0].dtype == xt.dtype),
      FR_ERR_INVALID_ARGUMENT, "batchnorm: x and y sizes or dtypes differ");
  FR_PLUGIN_CHECK(p.eps >= 0.0f && std::isfinite(p.eps), FR_ERR_INVALID_ARGUMENT, "batchnorm: bad eps");
  return channel_chunks(sdk::numel(xt) / c, c);
}
}  // namespace

uint64_t batchnorm_workspace(const FrCall* call) {
  const ChannelChunks k = geometry(call);
  return sdk::params<FrBatchNormParams>(call).training ? channel_workspace_bytes(k) : 0;
}

FR_CUDA_KERNEL_PREPARE(batchnorm) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] { *workspace_bytes = batchnorm_workspace(call); });
}

FR_CUDA_KERNEL_RUN(batchnorm) {
  return sdk::guard([&] { run_batchnorm(ctx, call, nullptr, 3, "batchnorm"); });
}

void run_batchnorm(void* ctx, const FrCall* call, const void* residual, uint32_t sums_index, const char* op,
                   const FrTensor* y2) {
  const auto& p = sdk::params<FrBatchNormParams>(call);
  const ChannelChunks k = geometry(call);
  const int64_t c = k.c, total = k.rows * k.c;
  check_vec(call->in[1], c, "gamma");
  check_vec(call->in[2], c, "beta");
  cudaStream_t st = stream_of(call);
  const unsigned blocks = grid_for(total, 256, ctx_of(ctx)->sm_count);
  if (p.training) {
    const uint32_t stats = sdk::bn_statistics_index(call);  // save_mean, save_invstd
    FR_PLUGIN_CHECK(!residual || stats == 1, FR_ERR_INVALID_ARGUMENT, "batchnorm_add: y is required");
    check_vec(call->out[stats], c, "save_mean");
    check_vec(call->out[stats + 1], c, "save_invstd");
    FR_PLUGIN_CHECK(call->rout[0].bytes >= static_cast<uint64_t>(c) * sizeof(float) &&
                        call->rout[1].bytes >= static_cast<uint64_t>(c) * sizeof(float),
                    FR_ERR_INVALID_ARGUMENT, "batchnorm: running statistics hold fewer than C floats");
    FR_PLUGIN_CHECK(k.rows >= 2, FR_ERR_INVALID_ARGUMENT,
                    "batchnorm: training needs more than one value per channel");
    FR_PLUGIN_CHECK(call->workspace && call->workspace_bytes >= channel_workspace_bytes(k),
                    FR_ERR_INVALID_ARGUMENT, "batchnorm: run without the workspace asked by prepare");
    const float* sums = sdk::bn_sums_input(call, sums_index, c, op);
    double* part = partials_of(call->workspace);
    float* coef = coefficients_of(call->workspace, k);
    with_float_type(call->in[0].dtype, "batchnorm", [&](auto tag) {
      using T = decltype(tag);
      const BnOutputs o{sdk::data<float>(call->in[1]),
                        sdk::data<float>(call->in[2]),
                        sdk::data<float>(call->out[stats]),
                        sdk::data<float>(call->out[stats + 1]),
                        sdk::data<float>(call->rout[0]),
                        sdk::data<float>(call->rout[1]),
                        static_cast<double>(k.rows),
                        p.eps,
                        p.momentum};
      const T* x = sdk::data<T>(call->in[0]);
      const T* r = static_cast<const T*>(residual);
      T* y = stats ? sdk::data<T>(call->out[0]) : nullptr;
      Subsample<T> sub;
      if (y2) {
        FR_PLUGIN_CHECK(y && call->out[0].ndim == 4, FR_ERR_INVALID_ARGUMENT,
                        "batchnorm_add: the subsampled output needs y, 4-d");
        const int64_t* d = call->out[0].dims;
        sub = Subsample<T>{sdk::data<T>(*y2), strided_rows(d[0] * d[1] * d[2], d[1], d[2], 2, 2)};
      }
      const bool vec = fixed_channels_fit<T>(c) && vectorizable<T>(total, {x, y, r ? r : x, coef}) &&
                       (!sub.p || vectorizable<T>(total, {sub.p}));
      // The finalize and the apply pass as programmatic dependents of the kernel before each (the forward
      // has no side stream whose blocks their early residency would keep out, but for a deferred update's
      // part on the update stream at its start: CompileOptions::deferred_update; dependent_launch.cuh).
      const Context* pdl = ctx_of(ctx)->bn_dependent_launch ? ctx_of(ctx) : nullptr;
      auto launch = [&](auto kernel, dim3 grid, dim3 block, auto... args) {
        launch_after_prior(pdl, kernel, grid, block, st, args...);
      };
      if (sums) {
        launch(bn_finalize_sums_kernel, dim3(static_cast<unsigned>((c + 127) / 128)), dim3(128), c, sums, o,
               coef);
      } else {
        // statistics, finalize and apply in one cooperative kernel where Context::bn_resident allows it
        const BnResidentCall one{call->in[0].dtype, x, r, y, k, part, coef, o, p.relu};
        if (y && vec && !sub.p && launch_bn_resident(ctx_of(ctx), one, st)) return;
        launch_channel_moments(call->in[0].dtype, call->in[0].data, k.rows, k.c, part, st);
        const double* pt = part;
        with_finalize_channels(ctx_of(ctx)->bn_finalize_channels, [&](auto ch) {
          constexpr int kCh = decltype(ch)::value;
          launch(bn_finalize_kernel<kCh>, dim3(finalize_blocks<kCh>(c)), dim3(kFinalizeThreads), k, pt, o,
                 coef);
        });
      }
      if (!y) return;  // statistics only
      if (vec) {
        const int64_t nv = total / Vec16<T>::kN;
        const unsigned vblocks = grid_for(nv, kFixedThreads, ctx_of(ctx)->sm_count);
        const float* cf = coef;
        if (r)
          launch(bn_apply_vec_kernel<T, true>, dim3(vblocks), dim3(kFixedThreads), x, r, cf, y, nv, c, p.relu,
                 sub);
        else
          launch(bn_apply_vec_kernel<T, false>, dim3(vblocks), dim3(kFixedThreads), x, r, cf, y, nv, c,
                 p.relu, sub);
      } else {
        bn_apply_kernel<T><<<blocks, 256, 0, st>>>(x, r, coef, y, total, c, p.relu, sub);
      }
    });
  } else {
    FR_PLUGIN_CHECK(!residual, FR_ERR_INVALID_ARGUMENT, "batchnorm_add: training only");
    check_vec(call->in[3], c, "running_mean");
    check_vec(call->in[4], c, "running_var");
    with_float_type(call->in[0].dtype, "batchnorm", [&](auto tag) {
      using T = decltype(tag);
      bn_infer_kernel<T><<<blocks, 256, 0, st>>>(sdk::data<T>(call->in[0]), sdk::data<float>(call->in[1]),
                                                 sdk::data<float>(call->in[2]), sdk::data<float>(call->in[3]),
                                                 sdk::data<float>(call->in[4]), sdk::data<T>(call->out[0]),
                                                 total, c, p.eps, p.relu);
    });
  }
  FR_CUDA_LAUNCH_CHECK();
}

}  // namespace fresco::cuda
