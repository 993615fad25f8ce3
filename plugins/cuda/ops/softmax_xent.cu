// CUDA fused softmax cross-entropy (mean over the batch, PyTorch label smoothing), forward + backward: one
// warp per row writes the row's loss and top-1 hit to the workspace, then one block sums them in a fixed
// order (deterministic). A label outside [0, C) makes the batch loss NaN instead of reading out of bounds.
// With the step scalars as rin the gradient is multiplied by their loss_scale. Test: tests/plugins/cuda.
#include <cfloat>

#include "cuda_common.h"
#include "fresco/softmax_xent_geometry.hpp"

namespace fresco::cuda {

namespace {
constexpr int kRowThreads = 256;  // 8 rows (warps) per block
constexpr int kSumThreads = 512;

// One warp computes row r: max/argmax, log-sum-exp (double), smoothed loss, top-1 hit and the gradient row.
// Lane 0 returns the loss (NaN for a label outside [0, C)) and the hit.
__device__ void softmax_xent_row(const float* __restrict__ z, const int32_t* __restrict__ y,
                                 float* __restrict__ dz, int64_t r, int64_t m, int64_t c, float eps,
                                 const FrStepScalars* scalars, float* loss, float* hit) {
  const int lane = threadIdx.x & 31;
  const float* zr = z + r * c;
  const int32_t label = y[r];
  if (label < 0 || label >= c) {
    *loss = __int_as_float(0x7fc00000), *hit = 0.0f;  // NaN marks a bad label
    return;
  }
  float mx = -FLT_MAX;
  int64_t arg = c;
  for (int64_t j = lane; j < c; j += 32)
    if (zr[j] > mx || (zr[j] == mx && j < arg)) mx = zr[j], arg = j;
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(0xffffffffu, mx, o);
    const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (om > mx || (om == mx && oa < arg)) mx = om, arg = oa;
  }
  double sum = 0.0, zsum = 0.0;
  for (int64_t j = lane; j < c; j += 32) sum += exp(static_cast<double>(zr[j] - mx)), zsum += zr[j];
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    zsum += __shfl_xor_sync(0xffffffffu, zsum, o);
  }
  const double lse = log(sum) + mx;
  *loss = static_cast<float>((1.0 - eps) * (lse - zr[label]) + eps * (lse - zsum / static_cast<double>(c)));
  *hit = arg == label ? 1.0f : 0.0f;
  if (dz) {
    const float off = eps / static_cast<float>(c);
    const float inv_m = (scalars ? scalars->loss_scale : 1.0f) / static_cast<float>(m);  // loss scaling
    for (int64_t j = lane; j < c; j += 32) {
      const float prob = static_cast<float>(exp(static_cast<double>(zr[j]) - lse));
      dz[r * c + j] = (prob - off - (j == label ? 1.0f - eps : 0.0f)) * inv_m;
    }
  }
}

// Many rows: one warp per row, results to the workspace, summed by softmax_xent_sum.
__global__ void __launch_bounds__(kRowThreads)
    softmax_xent_rows(const float* __restrict__ z, const int32_t* __restrict__ y, float* __restrict__ dz,
                      int64_t m, int64_t c, float eps, const FrStepScalars* scalars,
                      float* __restrict__ row_loss, float* __restrict__ row_hit) {
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x) >> 5;
  if (r >= m) return;
  float l, h;
  softmax_xent_row(z, y, dz, r, m, c, eps, scalars, &l, &h);
  if ((threadIdx.x & 31) == 0) row_loss[r] = l, row_hit[r] = h;
}

// Fixed-order sum of the per-row values: strided partial sums, then a tree (deterministic for a given m).
__global__ void __launch_bounds__(kSumThreads)
    softmax_xent_sum(const float* __restrict__ row_loss, const float* __restrict__ row_hit, int64_t m,
                     FrBatchResults* __restrict__ out) {
  __shared__ double loss_part[kSumThreads];
  __shared__ float hit_part[kSumThreads];
  double l = 0.0;
  float h = 0.0f;
  for (int64_t r = threadIdx.x; r < m; r += kSumThreads) l += row_loss[r], h += row_hit[r];
  loss_part[threadIdx.x] = l;
  hit_part[threadIdx.x] = h;
  __syncthreads();
  for (int s = kSumThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + s];
      hit_part[threadIdx.x] += hit_part[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out->loss = static_cast<float>(loss_part[0] / static_cast<double>(m));
    out->correct = hit_part[0];
    out->samples = static_cast<float>(m);
  }
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(softmax_xent) {
  return sdk::guard([&] {
    (void)ctx;
    sdk::expect_arity(call, 2, 0, 0, 1, "softmax_xent");
    *state = nullptr;
    *workspace_bytes = sdk::xent_workspace_bytes(call);
  });
}

FR_CUDA_KERNEL_RUN(softmax_xent) {
  return sdk::guard([&] {
    (void)ctx;
    const auto& p = sdk::params<FrSoftmaxXentParams>(call);
    const sdk::XentShape xs = sdk::xent_shape(call);
    const int64_t m = xs.m, c = xs.c;
    float* row_loss = static_cast<float*>(call->workspace);
    float* row_hit = row_loss + m;
    const unsigned blocks = static_cast<unsigned>((m * 32 + kRowThreads - 1) / kRowThreads);
    softmax_xent_rows<<<blocks, kRowThreads, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<int32_t>(call->in[1]),
        p.write_grad ? sdk::data<float>(call->out[0]) : nullptr, m, c, p.label_smoothing, xs.ls, row_loss,
        row_hit);
    FR_CUDA_LAUNCH_CHECK();
    softmax_xent_sum<<<1, kSumThreads, 0, stream_of(call)>>>(
        row_loss, row_hit, m, static_cast<FrBatchResults*>(call->rout[0].data));
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
