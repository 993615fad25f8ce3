// The training batchnorm forward (without given sums) as one cooperative kernel, where the three kernels
// of ops/batchnorm.cu (the moments pass, the finalize, the apply pass) cost two launches and a second read
// of the map: persistent blocks add each chunk's partials exactly as the moments pass does and keep the
// chunk's rows in shared memory, a grid barrier, the finalize of channel groups as its kernel does it (the
// same adds in the same order), another barrier, then the apply pass from the kept rows (rows that did not
// fit are read again). The same bits as the three kernels, by construction: the partials, totals, finalize
// and apply are the same device code (channel_sums.cuh, batchnorm_finalize.cuh). Context::bn_resident
// (FRESCO_CUDA_BN_RESIDENT) says where it runs. Test: tests/plugins/cuda/test_cuda_bn_resident.cpp.
// A grid is sized to fill the whole GPU: a non-cooperative kernel beside it (a side stream's weight
// gradient) only delays some of its blocks, but two of these grids at once could each hold SMs the other
// waits for. Without CompileOptions::fork_shortcuts every batchnorm runs on the main stream, one at a time;
// with it, a projection's batchnorm runs beside the main branch's, so the resident modes are not for
// forked shortcuts (untested; docs/decisions.md).
#pragma once

#include <utility>

#include "cuda_common.h"
#include "ops/batchnorm_finalize.cuh"
#include "ops/channel_sums.cuh"

namespace fresco::cuda {

constexpr int kResidentWarps = kVecThreads / 32;

// The V coefficients from ch, read through L2: other blocks of this kernel wrote them before the barrier.
template <int V>
__device__ __forceinline__ void load_channels_l2(const float* p, int64_t ch, float (&out)[V]) {
  static_assert(V % 4 == 0, "channel vectors are whole float4s");
  const float4* q = reinterpret_cast<const float4*>(p + ch);
#pragma unroll
  for (int j = 0; j < V / 4; ++j) {
    const float4 v = __ldcg(q + j);
    out[4 * j] = v.x, out[4 * j + 1] = v.y, out[4 * j + 2] = v.z, out[4 * j + 3] = v.w;
  }
}

// A kept 16-byte vector in shared memory, stored and loaded whole (Vec16<T> is aligned only as T is, so
// element-wise copies would take several shared-memory accesses each).
template <class T>
__device__ __forceinline__ void keep_vector(uint4* kept, int64_t i, const Vec16<T>& v) {
  uint4 u;
  memcpy(&u, &v, 16);
  kept[i] = u;
}
template <class T>
__device__ __forceinline__ Vec16<T> kept_vector(const uint4* kept, int64_t i) {
  const uint4 u = kept[i];
  Vec16<T> v;
  memcpy(&v, &u, 16);
  return v;
}

// The finalize step of a resident kernel: channel groups of kCh taken by the blocks (blockIdx.x, +
// gridDim.x, ...), each group's totals added as a finalize kernel of kCh channels a block adds them
// (channel_totals, the partials read through L2), then write(c, totals) by the thread that owns channel c.
template <int kCh, class W>
__device__ __forceinline__ void resident_finalize(const ChannelChunks& k, const double* part, W write) {
  const int64_t groups = (k.c + kCh - 1) / kCh;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t c0 = g * kCh;
    const double2 t = channel_totals<kCh, kResidentWarps, true>(k, part, c0);
    const int64_t c = c0 + threadIdx.x;
    if (threadIdx.x < kCh && c < k.c) write(c, t);
    __syncthreads();  // channel_totals' scratch is used again
  }
}

// One training batchnorm forward's operands: x and y [k.rows, k.c] of dtype (y may alias x), the residual
// r (x's size, or null: batchnorm_add adds it before the relu), the workspace's partials and coefficients
// (channel_workspace_bytes(k)), the per-channel outputs.
struct BnResidentCall {
  uint32_t dtype;
  const void* x;
  const void* r;
  void* y;
  ChannelChunks k;
  double* part;
  float* coef;
  BnOutputs o;
  int relu;
};

// The grid, the kept chunks per block and the dynamic shared memory of one cooperative launch of a
// resident kernel (kVecThreads threads a block, the chunks of k by blockIdx.x, + gridDim.x, ...) that keeps
// row_bytes per row of each kept chunk: every chunk kept, with as many blocks per SM (at most 4) as allow
// it; else, with mode 2, as many chunks per block as fit at 2, then 1 blocks per SM; a zero grid where
// neither works (or the device has no cooperative launch). Sets the kernel's dynamic shared memory limit.
struct ResidentShape {
  unsigned grid = 0;
  int slots = 0;
  size_t smem = 0;
};
ResidentShape plan_resident(const Context* ctx, const void* kernel, const ChannelChunks& k, size_t row_bytes,
                            int mode);

// kernel<<<sh.grid, kVecThreads, sh.smem, s>>>(args...) as a cooperative launch (all blocks resident, so
// they may wait for each other: cooperative_groups' grid sync).
template <class... P, class... A>
void launch_cooperative(void (*kernel)(P...), const ResidentShape& sh, cudaStream_t s, A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(sh.grid);
  cfg.blockDim = dim3(kVecThreads);
  cfg.dynamicSmemBytes = sh.smem;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  FR_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

// Launches the cooperative kernel on s and returns true where Context::bn_resident allows this call's
// shape (vector kernels fit, and the whole map fits the resident blocks' shared memory, or with 2 at least
// one chunk per block); returns false, launching nothing, otherwise.
bool launch_bn_resident(const Context* ctx, const BnResidentCall& call, cudaStream_t s);

// The training batchnorm backward with its own gradient sums (no gsums input) the same way
// (ops/bn_resident_backward.cu): each chunk's two gradient sums as bn_grad_sums_vec_kernel adds them, dy and
// x kept, a grid barrier, the finalize as bn_grad_finalize_kernel (dgamma, dbeta, the dx coefficients),
// another barrier, dx as bn_dx_vec_kernel writes it from the kept rows; the same bits as those three kernels.
// Context::bn_resident_backward (FRESCO_CUDA_BN_RESIDENT_BACKWARD) says where. dy, x, dx [k.rows, k.c] of
// dtype (dx may alias dy); with beta the fused relu's mask recomputed from x (the read mask is not taken).
struct BnResidentGradCall {
  uint32_t dtype;
  const void* dy;
  const void* x;
  const void* y;  // the fused relu's output (not read: the mask is recomputed), or null
  void* dx;
  ChannelChunks k;
  double* part;
  float* coef;                                // 3 C floats: a, b, k per channel
  const float *gamma, *beta, *mean, *invstd;  // beta null: no fused relu
  float *dgamma, *dbeta;
};
bool launch_bn_resident_backward(const Context* ctx, const BnResidentGradCall& call, cudaStream_t s);

}  // namespace fresco::cuda
