// CUDA range op lars_update over one parameter tensor (ops.h): a first kernel adds ||w||^2 and ||g + wd w||^2
// per block over a partition of the tensor that depends only on its size (per thread in double, then the
// block's threads in a fixed tree), a second has every block add the blocks' partials in the same fixed order
// (so each derives the same trust ratio) and update its part. The same rules as the CPU kernel
// (fresco/update_rules.h: fr_lars_trust, fr_lars_step); the sums differ from the CPU's in their order only.
// The workspace holds the partials. Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include <cmath>
#include <string>

#include "fresco/lars_checks.hpp"
#include "fresco/update_rules.h"
#include "ops/dependent_launch.cuh"
#include "ops/step_momentum.cuh"

namespace fresco::cuda {

namespace {
constexpr int kLarsThreads = 256;
constexpr int64_t kLarsMaxBlocks = 1024, kLarsPerBlock = 8192;  // elements a block takes at least

// Blocks for n elements, and the elements of each (the last one's part may be shorter).
int64_t lars_blocks(int64_t n) {
  const int64_t b = (n + kLarsPerBlock - 1) / kLarsPerBlock;
  return b < 1 ? 1 : b > kLarsMaxBlocks ? kLarsMaxBlocks : b;
}

// The sums of a and b over the block's threads, in a fixed tree order; valid in thread 0.
__device__ double2 block_sum(double a, double b) {
  __shared__ double sa[kLarsThreads], sb[kLarsThreads];
  sa[threadIdx.x] = a, sb[threadIdx.x] = b;
  __syncthreads();
  for (int half = kLarsThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      sa[threadIdx.x] += sa[threadIdx.x + half], sb[threadIdx.x] += sb[threadIdx.x + half];
    __syncthreads();
  }
  return make_double2(sa[0], sb[0]);
}

__global__ void __launch_bounds__(kLarsThreads)
    lars_norms_kernel(const float* __restrict__ w, const float* __restrict__ g, int64_t n, int64_t per_block,
                      float wd, const FrStepScalars* __restrict__ s, double* part) {
  if (s->skip_step) return;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * per_block,
                hi = lo + per_block < n ? lo + per_block : n;
  double sw = 0.0, sd = 0.0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kLarsThreads) {
    const double d = static_cast<double>(g[i] + wd * w[i]);
    sw += static_cast<double>(w[i]) * w[i];
    sd += d * d;
  }
  const double2 t = block_sum(sw, sd);
  if (threadIdx.x == 0) part[2 * blockIdx.x] = t.x, part[2 * blockIdx.x + 1] = t.y;
}

__global__ void __launch_bounds__(kLarsThreads)
    lars_step_kernel(float* __restrict__ w, float* __restrict__ buf, const float* __restrict__ g, int64_t n,
                     int64_t per_block, FrLarsParams p, const FrStepScalars* __restrict__ s,
                     const double* __restrict__ part, MomentumTable t) {
  allow_dependent_launch();  // step_done (ops/small_range_ops.cu) writes the scalars after this kernel
  if (s->skip_step) return;
  __shared__ float q_shared;
  if (threadIdx.x < 32) {  // every block adds the partials in the same order: the same q everywhere
    double sw = 0.0, sd = 0.0;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += 32) sw += part[2 * b], sd += part[2 * b + 1];
    for (int off = 16; off > 0; off /= 2) {
      sw += __shfl_down_sync(0xffffffffu, sw, off);
      sd += __shfl_down_sync(0xffffffffu, sd, off);
    }
    if (threadIdx.x == 0) q_shared = fr_lars_trust(sqrt(sw), sqrt(sd), p.eta);
  }
  __syncthreads();
  const float q = q_shared, mom = t.at(s->step, p.momentum);
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * per_block,
                hi = lo + per_block < n ? lo + per_block : n;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kLarsThreads)
    fr_lars_step(w + i, buf + i, g[i], s->lr, p.weight_decay, mom, q);
}

int64_t elements(const FrCall* call) {
  return static_cast<int64_t>(sdk::count<float>(call->rout[0]));
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(lars_update) {
  (void)ctx;
  (void)state;
  return sdk::guard([&] {
    sdk::expect_arity(call, 0, 0, 2, 2, "lars_update");
    *workspace_bytes = static_cast<uint64_t>(lars_blocks(elements(call))) * 2 * sizeof(double);
  });
}

FR_CUDA_KERNEL_RUN(lars_update) {
  (void)ctx;
  return sdk::guard([&] {
    uint64_t count = 0;
    const FrLarsParams& p = sdk::lars_checked(call, &count);
    const auto n = static_cast<int64_t>(count);
    const int64_t blocks = lars_blocks(n), per_block = (n + blocks - 1) / blocks;
    FR_PLUGIN_CHECK(
        call->workspace && call->workspace_bytes >= static_cast<uint64_t>(blocks) * 2 * sizeof(double),
        FR_ERR_INVALID_ARGUMENT, "lars_update: run without the workspace asked by prepare");
    const MomentumTable t = momentum_table(call, "lars_update");
    float* w = sdk::data<float>(call->rout[0]);
    float* buf = sdk::data<float>(call->rout[1]);
    const float* g = sdk::data<float>(call->rin[0]);
    const auto* s = static_cast<const FrStepScalars*>(call->rin[1].data);
    auto* part = static_cast<double*>(call->workspace);
    cudaStream_t st = stream_of(call);
    const unsigned grid = static_cast<unsigned>(blocks);
    lars_norms_kernel<<<grid, kLarsThreads, 0, st>>>(w, g, n, per_block, p.weight_decay, s, part);
    lars_step_kernel<<<grid, kLarsThreads, 0, st>>>(w, buf, g, n, per_block, p, s, part, t);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
