// The training batchnorm backward with its own gradient sums as one cooperative kernel (ops/bn_resident.h).
#include <cooperative_groups.h>

#include <type_traits>

#include "ops/batchnorm_backward.cuh"
#include "ops/bn_resident.h"
#include "ops/dependent_launch.cuh"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {

namespace cg = cooperative_groups;

// Blocks of kVecThreads threads take chunks blockIdx.x, + gridDim.x, ...; the first `slots` of them are kept
// in dynamic shared memory, dy's rows then x's (k.rows_per_chunk * C / V vectors each), between the sums and
// the dx pass. M: kNoMask or kRecomputeMask (batchnorm_backward.cuh).
template <class T, int M, int kCh>
__global__ void __launch_bounds__(kVecThreads)
    bn_resident_backward_kernel(const T* dy, ReluMask<T> mask, const T* x, const float* mean, ChannelChunks k,
                                double* part, const float* gamma, const float* invstd, float* dgamma,
                                float* dbeta, float* coef, T* dx, int slots) {
  static_assert(M != kReadMask, "the resident form recomputes the mask or has none");
  constexpr int V = Vec16<T>::kN;
  using Acc = GradAcc<T>;  // as bn_grad_sums_vec_kernel's
  __shared__ double sa[kVecSlots<V>], sb[kVecSlots<V>];
  extern __shared__ uint4 kept[];
  const int cvs = static_cast<int>(k.c / V), lanes = kVecThreads / cvs;
  const int cv = threadIdx.x % cvs, lane = threadIdx.x / cvs;
  const int64_t slot = k.rows_per_chunk * cvs;  // vectors of one map's kept chunk
  cg::grid_group grid = cg::this_grid();
  // The thread's channels' mean and mask coefficients, as both passes it replaces load them.
  Acc mu[V];
  thread_channel_means<T>(k, mean, mu);
  float scale[V], shift[V];
  if constexpr (M == kRecomputeMask) mask.coefficients(static_cast<int64_t>(cv) * V, scale, shift);
  const Vec16<T> no_y{};

  // 1. Each chunk's two gradient sums, as bn_grad_sums_vec_kernel adds them, its dy and x rows kept.
  int j = 0;
  for (int64_t chunk = blockIdx.x; chunk < k.chunks; chunk += gridDim.x, ++j) {
    if (j > 0) __syncthreads();  // the previous chunk's reads of sa, sb are done
    uint4* keep = j < slots ? kept + 2 * j * slot : nullptr;
    const int64_t r0 = chunk * k.rows_per_chunk;
    double* const parts[1] = {part};
    vector_chunk_partials_n<T, Acc, 1, false>(
        k, chunk, parts,
        [&](int64_t row, int col, Acc(&acc)[1][2][V]) {
          const int64_t i = row * cvs + col;
          const Vec16<T> g = load16(dy, i), xv = load16(x, i);
          if (keep) {
            const int64_t at = (row - r0) * cvs + col;
            keep_vector(keep, at, g);
            keep_vector(keep, slot + at, xv);
          }
          add_grad_vector<M>(g, xv, no_y, scale, shift, mu, acc[0][0], acc[0][1]);
        },
        sa, sb);
  }
  grid.sync();  // every chunk's partials are written

  // 2. The finalize of channel groups of kCh, as bn_grad_finalize_kernel<kCh> does it.
  resident_finalize<kCh>(k, part, [&](int64_t c, double2 t) {
    write_grad_coefficients(k, c, t, gamma, invstd, dgamma, dbeta, coef);
  });
  grid.sync();  // every channel's coefficients are written

  // 3. dx, as bn_dx_vec_kernel writes it, each thread on the channels and rows it read in 1.
  if (lane < lanes) {
    const int64_t ch = static_cast<int64_t>(cv) * V;
    float ca[V], cb[V], ck[V], mf[V];
    load_channels_l2<V>(coef, ch, ca);
    load_channels_l2<V>(coef, k.c + ch, cb);
    load_channels_l2<V>(coef, 2 * k.c + ch, ck);
    load_channels(mean, ch, mf);
    j = 0;
    for (int64_t chunk = blockIdx.x; chunk < k.chunks; chunk += gridDim.x, ++j) {
      const uint4* keep = j < slots ? kept + 2 * j * slot : nullptr;
      const int64_t r0 = chunk * k.rows_per_chunk;
      const int64_t r1 = r0 + k.rows_per_chunk < k.rows ? r0 + k.rows_per_chunk : k.rows;
#pragma unroll 2
      for (int64_t row = r0 + lane; row < r1; row += lanes) {
        const int64_t i = row * cvs + cv, at = (row - r0) * cvs + cv;
        Vec16<T> g = keep ? kept_vector<T>(keep, at) : load16(dy, i);
        const Vec16<T> xv = keep ? kept_vector<T>(keep, slot + at) : load16(x, i);
        bn_dx_vector<M>(g, xv, no_y, scale, shift, mf, ca, cb, ck);
        store16(dx, i, g);
      }
    }
  }
  allow_dependent_launch();  // as the dx pass does (a small memset kernel may wait beside the tail)
}

template <class T, int M, int kCh>
bool launch_typed(const Context* ctx, const BnResidentGradCall& c, cudaStream_t s) {
  auto* kernel = bn_resident_backward_kernel<T, M, kCh>;
  const ResidentShape sh =
      plan_resident(ctx, reinterpret_cast<const void*>(kernel), c.k,
                    2 * static_cast<size_t>(c.k.c) * sizeof(T), ctx->bn_resident_backward);
  if (sh.grid == 0) return false;
  ReluMask<T> mask;
  if constexpr (M == kRecomputeMask)
    mask.gamma = c.gamma, mask.beta = c.beta, mask.mean = c.mean, mask.invstd = c.invstd;
  launch_cooperative(kernel, sh, s, static_cast<const T*>(c.dy), mask, static_cast<const T*>(c.x), c.mean,
                     c.k, c.part, c.gamma, c.invstd, c.dgamma, c.dbeta, c.coef, static_cast<T*>(c.dx),
                     sh.slots);
  return true;
}
}  // namespace

bool launch_bn_resident_backward(const Context* ctx, const BnResidentGradCall& c, cudaStream_t s) {
  if (!ctx || ctx->bn_resident_backward == 0 || !c.dx) return false;
  bool launched = false;
  with_float_type(c.dtype, "batchnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t total = c.k.rows * c.k.c;
    // the conditions of the vector sums and dx kernels it replaces (the fused relu's y among the pointers
    // they check, though the recomputed mask does not read it)
    const void* y = c.y ? c.y : c.dy;
    if (!vector_partials_fit<T>(c.k, {c.dy, c.x, y, c.mean, c.gamma, c.beta, c.invstd}) ||
        !fixed_channels_fit<T>(c.k.c) ||
        !vectorizable<T>(total, {c.dy, c.x, c.dx, y, c.coef, c.mean, c.gamma, c.beta, c.invstd}))
      return;
    with_finalize_channels(ctx->grad_finalize_channels, [&](auto ch) {
      constexpr int kCh = decltype(ch)::value;
      launched =
          c.beta ? launch_typed<T, kRecomputeMask, kCh>(ctx, c, s) : launch_typed<T, kNoMask, kCh>(ctx, c, s);
    });
  });
  return launched;
}

}  // namespace fresco::cuda
