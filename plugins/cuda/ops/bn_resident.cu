// The training batchnorm forward as one cooperative kernel (ops/bn_resident.h).
#include "ops/bn_resident.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "ops/dependent_launch.cuh"
#include "ops/dtype.cuh"

namespace fresco::cuda {

namespace {

namespace cg = cooperative_groups;

// Blocks of kVecThreads threads take chunks blockIdx.x, + gridDim.x, ...; the first `slots` of them are kept
// in dynamic shared memory (k.rows_per_chunk * C / V vectors each) between the first pass and the apply.
template <class T, bool Residual, int kCh>
__global__ void __launch_bounds__(kVecThreads)
    bn_resident_kernel(const T* x, const T* r, T* y, ChannelChunks k, double* part, BnOutputs o, float* coef,
                       int relu, int slots) {
  constexpr int V = Vec16<T>::kN;
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, float>;  // as the moments pass's
  __shared__ double sa[kVecSlots<V>], sb[kVecSlots<V>];
  extern __shared__ uint4 kept[];
  const int cvs = static_cast<int>(k.c / V), lanes = kVecThreads / cvs;
  const int cv = threadIdx.x % cvs, lane = threadIdx.x / cvs;
  const int64_t slot = k.rows_per_chunk * cvs;
  cg::grid_group grid = cg::this_grid();

  // 1. Each chunk's partials, as moments_vec_kernel adds them (ops/channel_moments.cu), its rows kept.
  int j = 0;
  for (int64_t chunk = blockIdx.x; chunk < k.chunks; chunk += gridDim.x, ++j) {
    if (j > 0) __syncthreads();  // the previous chunk's reads of sa, sb are done
    uint4* keep = j < slots ? kept + j * slot : nullptr;
    const int64_t r0 = chunk * k.rows_per_chunk;
    double* const parts[1] = {part};
    vector_chunk_partials_n<T, Acc, 1, false>(
        k, chunk, parts,
        [&](int64_t row, int col, Acc(&acc)[1][2][V]) {
          const Vec16<T> v = load16(x, row * cvs + col);
          if (keep) keep_vector(keep, (row - r0) * cvs + col, v);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const Acc f = to_f(v.v[e]);
            acc[0][0][e] += f;
            acc[0][1][e] += f * f;
          }
        },
        sa, sb);
  }
  grid.sync();  // every chunk's partials are written

  // 2. The finalize of channel groups of kCh, as bn_finalize_kernel<kCh> does it (ops/batchnorm.cu).
  resident_finalize<kCh>(k, part, [&](int64_t c, double2 t) { bn_finalize_totals(c, k.c, t, o, coef); });
  grid.sync();  // every channel's scale and shift are written

  // 3. The apply pass, each thread on the channels and rows it read in 1 (the kept rows from shared memory).
  if (lane < lanes) {
    float scale[V], shift[V];
    load_channels_l2<V>(coef, static_cast<int64_t>(cv) * V, scale);
    load_channels_l2<V>(coef, k.c + static_cast<int64_t>(cv) * V, shift);
    j = 0;
    for (int64_t chunk = blockIdx.x; chunk < k.chunks; chunk += gridDim.x, ++j) {
      const uint4* keep = j < slots ? kept + j * slot : nullptr;
      const int64_t r0 = chunk * k.rows_per_chunk;
      const int64_t r1 = r0 + k.rows_per_chunk < k.rows ? r0 + k.rows_per_chunk : k.rows;
#pragma unroll 4
      for (int64_t row = r0 + lane; row < r1; row += lanes) {
        const int64_t i = row * cvs + cv;
        Vec16<T> a = keep ? kept_vector<T>(keep, (row - r0) * cvs + cv) : load16(x, i);
        Vec16<T> b;
        if constexpr (Residual) b = load16(r, i);
        bn_apply_vector<T, Residual>(a, b, scale, shift, relu);
        store16(y, i, a);
      }
    }
  }
  allow_dependent_launch();  // as the apply pass does (a small memset kernel may wait beside the tail)
}

// Whether `bps` blocks per SM of `dyn` dynamic bytes each are resident on every SM at once (the cooperative
// launch's condition), by the occupancy calculator.
bool resident(const void* kernel, int bps, size_t dyn) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kVecThreads, dyn) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n >= bps;
}

template <class T, bool Residual, int kCh>
bool launch_typed(const Context* ctx, const BnResidentCall& c, cudaStream_t s) {
  auto* kernel = bn_resident_kernel<T, Residual, kCh>;
  const ResidentShape sh = plan_resident(ctx, reinterpret_cast<const void*>(kernel), c.k,
                                         static_cast<size_t>(c.k.c) * sizeof(T), ctx->bn_resident);
  if (sh.grid == 0) return false;
  launch_cooperative(kernel, sh, s, static_cast<const T*>(c.x), static_cast<const T*>(c.r),
                     static_cast<T*>(c.y), c.k, c.part, c.o, c.coef, c.relu, sh.slots);
  return true;
}
}  // namespace

ResidentShape plan_resident(const Context* ctx, const void* kernel, const ChannelChunks& k, size_t row_bytes,
                            int mode) {
  int optin = 0, per_sm = 0, reserved = 0, coop = 0;
  cudaFuncAttributes fa{};
  if (k.chunks < 1 || ctx->sm_count < 1 ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx->device) != cudaSuccess ||
      cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ctx->device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, ctx->device) !=
          cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, ctx->device) != cudaSuccess ||
      cudaFuncGetAttributes(&fa, kernel) != cudaSuccess || !coop ||
      fa.sharedSizeBytes >= static_cast<size_t>(optin)) {
    (void)cudaGetLastError();
    return {};
  }
  const size_t stat = fa.sharedSizeBytes, chunk_bytes = static_cast<size_t>(k.rows_per_chunk) * row_bytes;
  // The kernel's dynamic limit at the most a block may have, set once and never lowered: a captured graph
  // holds launches of one kernel with several sizes.
  const size_t most = static_cast<size_t>(optin) - stat;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(most)) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  // the dynamic bytes a block may take with bps blocks per SM
  auto room = [&](int bps) -> size_t {
    const size_t share = static_cast<size_t>(per_sm) / static_cast<size_t>(bps);
    const size_t fixed = stat + static_cast<size_t>(reserved);
    return share > fixed ? std::min(share - fixed, most) : 0;
  };
  for (int bps = 4; bps >= 1; --bps) {  // the whole map kept
    const int64_t grid = std::min<int64_t>(k.chunks, static_cast<int64_t>(bps) * ctx->sm_count);
    const int64_t slots = (k.chunks + grid - 1) / grid;
    const size_t dyn = static_cast<size_t>(slots) * chunk_bytes;
    if (dyn <= room(bps) && resident(kernel, bps, dyn))
      return {static_cast<unsigned>(grid), static_cast<int>(slots), dyn};
  }
  if (mode < 2 || chunk_bytes == 0) return {};
  for (int bps = 2; bps >= 1; --bps) {  // part of it
    const int64_t slots = static_cast<int64_t>(room(bps) / chunk_bytes);
    const int64_t grid = std::min<int64_t>(k.chunks, static_cast<int64_t>(bps) * ctx->sm_count);
    const size_t dyn = static_cast<size_t>(slots) * chunk_bytes;
    if (slots >= 1 && resident(kernel, bps, dyn))
      return {static_cast<unsigned>(grid), static_cast<int>(slots), dyn};
  }
  return {};
}

bool launch_bn_resident(const Context* ctx, const BnResidentCall& c, cudaStream_t s) {
  if (!ctx || ctx->bn_resident == 0 || !c.y) return false;
  bool launched = false;
  with_float_type(c.dtype, "batchnorm", [&](auto tag) {
    using T = decltype(tag);
    const int64_t total = c.k.rows * c.k.c;
    if (!vector_partials_fit<T>(c.k, {c.x}) || !fixed_channels_fit<T>(c.k.c) ||
        !vectorizable<T>(total, {c.x, c.y, c.r ? c.r : c.x, c.coef}))
      return;
    with_finalize_channels(ctx->bn_finalize_channels, [&](auto ch) {
      constexpr int kCh = decltype(ch)::value;
      launched = c.r ? launch_typed<T, true, kCh>(ctx, c, s) : launch_typed<T, false, kCh>(ctx, c, s);
    });
  });
  return launched;
}

}  // namespace fresco::cuda
