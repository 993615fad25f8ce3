// CUDA optimizer range ops: ONE kernel over a whole region range (every FC weight, or every no-decay tensor)
// using the shared rules of fresco/update_rules.h, so CPU and GPU compute the same numbers; 16-byte loads
// and stores where the ranges allow. lr, step and
// skip_step are read from S-region memory inside the kernel, and so is the step's momentum (Adam: beta1) from
// the optional per-step table (ops.h). With the weight copy (ops.h, FR_KERNEL_WEIGHT_COPY) each kernel also
// stores the updated weights rounded to 16 bits (the W -> A cast_range's bits) from the same registers, on a
// skipped step the weights as they are. The gradients may be f16 or bf16, unscaled as they are read (ops.h,
// FR_KERNEL_HALF_GRADS). With backups (ops.h, FR_KERNEL_UPDATE_BACKUPS) each kernel stores the values it
// overwrites, as it loads them, into them (on a skipped step the ranges as they are). Test:
// tests/plugins/cuda (vs the CPU kernels).
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "fresco/update_rules.h"
#include "ops/dependent_launch.cuh"
#include "ops/dtype.cuh"
#include "ops/step_momentum.cuh"

namespace fresco::cuda {

namespace {
// Elements [0, n): float4 loads and stores for the first n / 4 groups when every array is 16-byte aligned
// (VEC), then the tail one by one. The update rule runs per element either way: the same numbers.
template <bool VEC, class Step>
__device__ __forceinline__ void for_each_element(int64_t n, Step step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t done = 0;
  if constexpr (VEC) {
    for (int64_t i = t; i < n / 4; i += stride) step.group(i);
    done = n / 4 * 4;
  }
  for (int64_t i = done + t; i < n; i += stride) step.one(i);
}

// The weight copy's stores: C the copy's 16-bit type, or void for none (every store a no-op).
template <class C>
struct CopyOut {
  using Type = C;
  C* c;
  __device__ __forceinline__ void one(int64_t i, float w) const {
    if constexpr (!std::is_void_v<C>) c[i] = from_f<C>(w);
  }
  __device__ __forceinline__ void group(int64_t i, const float4& w) const {  // elements 4i..4i+3, 8 bytes
    if constexpr (!std::is_void_v<C>) {
      C v[4] = {from_f<C>(w.x), from_f<C>(w.y), from_f<C>(w.z), from_f<C>(w.w)};
      uint2 u;
      memcpy(&u, v, sizeof u);
      reinterpret_cast<uint2*>(c)[i] = u;
    }
  }
};

// An update's gradients: G float, read as they are, or __half / __nv_bfloat16 (ops.h, the 16-bit gradients):
// float(g) * inv, inv = 1 / loss_scale, the products unscale_grads' cast form stores. __fmul_rn keeps each
// product rounded on its own: a plain * may be contracted with the update's first add (g + wd w) into one
// fma, which changes the last bit of some updates (seen on an H200: Nesterov's buffers differed).
template <class G>
struct GradIn {
  const G* g;
  float inv;
  __device__ __forceinline__ float one(int64_t i) const {
    if constexpr (std::is_same_v<G, float>)
      return g[i];
    else
      return __fmul_rn(to_f(g[i]), inv);
  }
  __device__ __forceinline__ float4 group(int64_t i) const {  // elements 4i..4i+3
    if constexpr (std::is_same_v<G, float>) {
      return reinterpret_cast<const float4*>(g)[i];
    } else {
      const uint2 u = reinterpret_cast<const uint2*>(g)[i];
      G v[4];
      memcpy(v, &u, sizeof u);
      return make_float4(__fmul_rn(to_f(v[0]), inv), __fmul_rn(to_f(v[1]), inv), __fmul_rn(to_f(v[2]), inv),
                         __fmul_rn(to_f(v[3]), inv));
    }
  }
};

// An update's backups (ops.h, FR_KERNEL_UPDATE_BACKUPS): b[k] gets the values of its k-th f32 range (w, then
// the buffer; Adam: w, m, v) as they were before the step; null: none.
struct Backups {
  float* b[3];
  __host__ __device__ bool any() const { return b[0] || b[1] || b[2]; }
  __device__ __forceinline__ void one(int k, int64_t i, float v) const {
    if (b[k]) b[k][i] = v;
  }
  __device__ __forceinline__ void group(int k, int64_t i, const float4& v) const {
    if (b[k]) reinterpret_cast<float4*>(b[k])[i] = v;
  }
};

// A skipped step: the ranges as they are into their backups, the weights into the copy.
template <class C>
struct SkipStep {
  const float* r[3];  // w, then the buffer (Adam: m, v); null past the last
  Backups bk;
  CopyOut<C> out;
  __device__ void one(int64_t i) const {
    for (int k = 0; k < 3; ++k)
      if (r[k]) bk.one(k, i, r[k][i]);
    out.one(i, r[0][i]);
  }
  __device__ void group(int64_t i) const {
    for (int k = 0; k < 3; ++k)
      if (r[k]) bk.group(k, i, reinterpret_cast<const float4*>(r[k])[i]);
    out.group(i, reinterpret_cast<const float4*>(r[0])[i]);
  }
};

template <class C, class G>
struct SgdStep {
  float *w, *buf;
  GradIn<G> g;
  float lr;
  FrSgdParams p;
  CopyOut<C> out;
  Backups bk;
  __device__ void one(int64_t i) const {
    bk.one(0, i, w[i]);
    if (buf) bk.one(1, i, buf[i]);
    fr_sgd_step(w + i, buf ? buf + i : nullptr, g.one(i), lr, p.weight_decay, p.momentum, p.nesterov);
    out.one(i, w[i]);
  }
  __device__ void group(int64_t i) const {
    float4 wv = reinterpret_cast<float4*>(w)[i], bv = buf ? reinterpret_cast<float4*>(buf)[i] : float4{};
    bk.group(0, i, wv);
    if (buf) bk.group(1, i, bv);
    const float4 gv = g.group(i);
    float* wp = &wv.x;
    float* bp = &bv.x;
    const float* gp = &gv.x;
    for (int j = 0; j < 4; ++j)
      fr_sgd_step(wp + j, buf ? bp + j : nullptr, gp[j], lr, p.weight_decay, p.momentum, p.nesterov);
    reinterpret_cast<float4*>(w)[i] = wv;
    if (buf) reinterpret_cast<float4*>(buf)[i] = bv;
    out.group(i, wv);
  }
};

template <class C, class G>
struct AdamStep {
  float *w, *m, *v;
  GradIn<G> g;
  FrAdamParams p;
  FrAdamStepConsts k;
  CopyOut<C> out;
  Backups bk;
  __device__ void one(int64_t i) const {
    bk.one(0, i, w[i]), bk.one(1, i, m[i]), bk.one(2, i, v[i]);
    fr_adam_step(w + i, m + i, v + i, g.one(i), &p, k);
    out.one(i, w[i]);
  }
  __device__ void group(int64_t i) const {
    float4 wv = reinterpret_cast<float4*>(w)[i], mv = reinterpret_cast<float4*>(m)[i],
           vv = reinterpret_cast<float4*>(v)[i];
    bk.group(0, i, wv), bk.group(1, i, mv), bk.group(2, i, vv);
    const float4 gv = g.group(i);
    float *wp = &wv.x, *mp = &mv.x, *vp = &vv.x;
    const float* gp = &gv.x;
    for (int j = 0; j < 4; ++j) fr_adam_step(wp + j, mp + j, vp + j, gp[j], &p, k);
    reinterpret_cast<float4*>(w)[i] = wv;
    reinterpret_cast<float4*>(m)[i] = mv;
    reinterpret_cast<float4*>(v)[i] = vv;
    out.group(i, wv);
  }
};

template <bool VEC, class C, class G>
__global__ void sgd_kernel(float* __restrict__ w, float* __restrict__ buf, const G* __restrict__ g, int64_t n,
                           FrSgdParams p, const FrStepScalars* __restrict__ s, MomentumTable t,
                           CopyOut<C> out, Backups bk) {
  allow_dependent_launch();  // step_done (ops/small_range_ops.cu) writes the scalars after this kernel
  if (s->skip_step) {
    if (!std::is_void_v<C> || bk.any()) for_each_element<VEC>(n, SkipStep<C>{{w, buf, nullptr}, bk, out});
    return;
  }
  p.momentum = t.at(s->step, p.momentum);
  for_each_element<VEC>(n, SgdStep<C, G>{w, buf, {g, 1.0f / s->loss_scale}, s->lr, p, out, bk});
}

template <bool VEC, class C, class G>
__global__ void adam_kernel(float* __restrict__ w, float* __restrict__ m, float* __restrict__ v,
                            const G* __restrict__ g, int64_t n, FrAdamParams p,
                            const FrStepScalars* __restrict__ s, MomentumTable t, CopyOut<C> out,
                            Backups bk) {
  allow_dependent_launch();  // step_done (ops/small_range_ops.cu) writes the scalars after this kernel
  if (s->skip_step) {
    if (!std::is_void_v<C> || bk.any()) for_each_element<VEC>(n, SkipStep<C>{{w, m, v}, bk, out});
    return;
  }
  p.beta1 = t.at(s->step, p.beta1);
  for_each_element<VEC>(
      n,
      AdamStep<C, G>{w, m, v, {g, 1.0f / s->loss_scale}, p, fr_adam_consts(&p, s->lr, s->updates), out, bk});
}

// Runs launch(CopyOut<C>) with C the copy's 16-bit type, or void without a copy.
template <class F>
void with_copy(const FrRange* copy, const char* op, F&& launch) {
  if (!copy) return launch(CopyOut<void>{nullptr});
  with_half_type(copy->dtype, op, [&](auto t) {
    using C = decltype(t);
    launch(CopyOut<C>{static_cast<C*>(copy->data)});
  });
}

// Runs launch(CopyOut<C>, g) with C as with_copy's and g the gradients as their storage type (float, or the
// 16-bit gradients'); `vec` whether every array allows the 16-byte groups (g: 4 elements a load).
template <class F>
void with_copy_and_grads(const FrRange* copy, const FrRange& g, const char* op, F&& launch) {
  with_copy(copy, op, [&](auto out) {
    with_float_type(g.dtype, op, [&](auto tag) {
      using G = decltype(tag);
      launch(out, static_cast<const G*>(g.data));
    });
  });
}
// Whether the gradients g allow a load of four at every group (16 bytes for f32, 8 for 16-bit).
inline bool grads_vectorizable(const FrRange& g) {
  return reinterpret_cast<uintptr_t>(g.data) % (g.dtype == FR_F32 ? 16 : 8) == 0;
}

}  // namespace

FR_CUDA_KERNEL_RUN(sgd_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 1, "sgd_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "sgd_update: step scalars range too small");
    const auto& p = sdk::params<FrSgdParams>(call);
    const int64_t n = static_cast<int64_t>(sdk::count<float>(call->rout[0]));
    const FrRange& gr = sdk::update_grads(call, static_cast<uint64_t>(n), "sgd_update");
    const bool has_buf = p.momentum != 0.0f;
    FR_PLUGIN_CHECK(
        !has_buf || (call->n_rout >= 2 && static_cast<int64_t>(sdk::count<float>(call->rout[1])) == n),
        FR_ERR_INVALID_ARGUMENT, "sgd_update: momentum buffer missing or of another size");
    float* w = sdk::data<float>(call->rout[0]);
    float* buf = has_buf ? sdk::data<float>(call->rout[1]) : nullptr;
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    const unsigned grid = grid_for(n / 4 + 1, 256, ctx_of(ctx)->sm_count);
    const MomentumTable t = momentum_table(call, "sgd_update");
    const uint32_t kept = has_buf ? 2 : 1;  // the f32 ranges it writes
    void* backup[2];
    const uint32_t tail = sdk::update_backups(call, p.backups, kept, backup, "sgd_update");
    const FrRange* copy = sdk::weight_copy(call, kept, static_cast<uint64_t>(n), "sgd_update", tail);
    const Backups bk{
        {static_cast<float*>(backup[0]), kept > 1 ? static_cast<float*>(backup[1]) : nullptr, nullptr}};
    const bool vec =
        aligned16({w, buf, copy ? copy->data : nullptr, bk.b[0], bk.b[1]}) && grads_vectorizable(gr);
    with_copy_and_grads(copy, gr, "sgd_update", [&](auto out, auto g) {
      using C = typename decltype(out)::Type;
      using G = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
      if (vec)
        sgd_kernel<true, C, G><<<grid, 256, 0, stream_of(call)>>>(w, buf, g, n, p, s, t, out, bk);
      else
        sgd_kernel<false, C, G><<<grid, 256, 0, stream_of(call)>>>(w, buf, g, n, p, s, t, out, bk);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

FR_CUDA_KERNEL_RUN(adam_update) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 3, "adam_update");
    FR_PLUGIN_CHECK(call->rin[1].bytes >= sizeof(FrStepScalars), FR_ERR_INVALID_ARGUMENT,
                    "adam_update: step scalars range too small");
    const auto& p = sdk::params<FrAdamParams>(call);
    const int64_t n = static_cast<int64_t>(sdk::count<float>(call->rout[0]));
    const FrRange& gr = sdk::update_grads(call, static_cast<uint64_t>(n), "adam_update");
    FR_PLUGIN_CHECK(static_cast<int64_t>(sdk::count<float>(call->rout[1])) == n &&
                        static_cast<int64_t>(sdk::count<float>(call->rout[2])) == n,
                    FR_ERR_INVALID_ARGUMENT, "adam_update: w/m/v ranges differ in size");
    float *w = sdk::data<float>(call->rout[0]), *m = sdk::data<float>(call->rout[1]),
          *v = sdk::data<float>(call->rout[2]);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    const unsigned grid = grid_for(n / 4 + 1, 256, ctx_of(ctx)->sm_count);
    const MomentumTable t = momentum_table(call, "adam_update");
    void* backup[3];
    const uint32_t tail = sdk::update_backups(call, p.backups, 3, backup, "adam_update");
    const FrRange* copy = sdk::weight_copy(call, 3, static_cast<uint64_t>(n), "adam_update", tail);
    const Backups bk{
        {static_cast<float*>(backup[0]), static_cast<float*>(backup[1]), static_cast<float*>(backup[2])}};
    const bool vec = aligned16({w, m, v, copy ? copy->data : nullptr, bk.b[0], bk.b[1], bk.b[2]}) &&
                     grads_vectorizable(gr);
    with_copy_and_grads(copy, gr, "adam_update", [&](auto out, auto g) {
      using C = typename decltype(out)::Type;
      using G = std::remove_cv_t<std::remove_pointer_t<decltype(g)>>;
      if (vec)
        adam_kernel<true, C, G><<<grid, 256, 0, stream_of(call)>>>(w, m, v, g, n, p, s, t, out, bk);
      else
        adam_kernel<false, C, G><<<grid, 256, 0, stream_of(call)>>>(w, m, v, g, n, p, s, t, out, bk);
    });
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
