// CUDA fc_softmax_xent (ops.h): the training head in one kernel plus the loss sum. One warp per row computes
// the row's logits as small_fc's forward does (lanes stride over k, butterflies), its loss, hit and gradient
// by the loss kernel's own row function (ops/softmax_xent_rows.cuh), then its input gradient as small_fc's
// input gradient does (columns over lanes, classes in order), masked where x <= 0 when asked: the same
// arithmetic in the same order as the nodes it replaces, so the same bits. w sits in shared memory when it
// fits. Rows of up to 512 inputs run a variant that keeps the row, the logits and the gradient in registers
// (fc_softmax_xent_regs_kernel). softmax_xent_sum adds the rows' losses and hits (launched to start as the
// rows finish: ops/dependent_launch.cuh). Test: tests/plugins/cuda
// (against the CPU kernel).
#include "fresco/softmax_xent_geometry.hpp"
#include "ops/small_fc.h"
#include "ops/small_fc_rows.cuh"
#include "ops/softmax_xent_rows.cuh"

namespace fresco::cuda {

namespace {
constexpr int kHeadWarps = 8;  // rows per block

template <int NMAX>
__global__ void __launch_bounds__(kHeadWarps * 32)
    fc_softmax_xent_kernel(const float* __restrict__ x, const float* __restrict__ w,
                           const float* __restrict__ b, const int32_t* __restrict__ labels,
                           float* __restrict__ logits, float* __restrict__ dlogits, float* __restrict__ dx,
                           int64_t m, int n, int64_t k, float eps, const FrStepScalars* scalars,
                           float* __restrict__ row_loss, float* __restrict__ row_hit, bool mask,
                           bool w_shared) {
  allow_dependent_launch();  // softmax_xent_sum waits for this kernel's rows
  const float* wp = block_weights(w, n * k, w_shared);
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadWarps + (threadIdx.x >> 5);
  if (row >= m) return;  // the whole warp: row is warp-uniform
  const float* xr = x + row * k;
  const float out = row_dots<NMAX>(xr, wp, n, k, lane);  // the logits, as small_fc's forward
  if (lane < n) logits[row * n + lane] = b ? out + b[lane] : out;
  __syncwarp();  // the row's logits, written by its lanes, are read by all of them
  // Loss, hit and gradient row (the loss kernel's function).
  float l, h;
  softmax_xent_row(logits, labels, dlogits, row, m, n, eps, scalars, &l, &h);
  if (lane == 0) row_loss[row] = l, row_hit[row] = h;
  __syncwarp();
  // Input gradient (small_fc input_grad_kernel's order), then the previous layer's relu mask.
  const float* d = dlogits + row * n;
  for (int64_t c = lane; c < k; c += 32) {
    float s = column_dot<NMAX>(d, wp, n, k, c);
    if (mask) s = xr[c] > 0.0f ? s : 0.0f;
    dx[row * k + c] = s;
  }
}

// Stages w [n, k] into shared memory as ws [NMAX, KP]: row j at j * KP, zeros past column k and from row n
// on, so the row kernel's loops need no bounds tests. Every thread of the block takes part; waits for all.
template <int NMAX, int KP>
__device__ __forceinline__ void stage_padded_weights(const float* __restrict__ w, float* ws, int n, int k) {
  for (int i = threadIdx.x; i < NMAX * KP; i += blockDim.x) {
    const int j = i / KP, c = i % KP;
    ws[i] = j < n && c < k ? __ldg(w + static_cast<int64_t>(j) * k + c) : 0.0f;
  }
  __syncthreads();
}

// fc_softmax_xent_kernel for rows of k <= 32 * KV inputs and n <= NMAX classes whose padded w (NMAX x 32 KV
// floats) fits in shared memory. Each lane loads its columns x[lane + 32 i] into registers first (in flight
// while the block stages w), keeps the logit, the gradient and the relu mask in registers and passes the
// gradient row between lanes by shuffles, instead of writing each to memory and reading it back. The padded
// w lets every load be unconditional at a fixed offset; a term past k or n is not added (a select, not an
// addition of zero, which could turn a -0 sum into +0). So the same arithmetic on the same values in the same
// order as fc_softmax_xent_kernel: the same bits.
template <int NMAX, int KV>
__global__ void __launch_bounds__(kHeadWarps * 32)
    fc_softmax_xent_regs_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                const float* __restrict__ b, const int32_t* __restrict__ labels,
                                float* __restrict__ logits, float* __restrict__ dlogits,
                                float* __restrict__ dx, int64_t m, int n, int k, float eps,
                                const FrStepScalars* scalars, float* __restrict__ row_loss,
                                float* __restrict__ row_hit, bool mask) {
  constexpr int KP = 32 * KV;
  __shared__ float ws[NMAX * KP];
  allow_dependent_launch();  // softmax_xent_sum waits for this kernel's rows
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadWarps + (threadIdx.x >> 5);
  const bool live = row < m;  // warp-uniform; every thread reaches the block's staging barrier
  const float* xr = x + row * k;
  float xv[KV];
#pragma unroll
  for (int i = 0; i < KV; ++i) {
    const int c = lane + 32 * i;
    xv[i] = live && c < k ? xr[c] : 0.0f;
  }
  const int32_t label = live ? labels[row] : 0;
  stage_padded_weights<NMAX, KP>(w, ws, n, k);
  if (!live) return;
  // The logits: each lane's partial sums over its columns in increasing order (as row_dots), then
  // butterflies.
  float acc[NMAX];
#pragma unroll
  for (int j = 0; j < NMAX; ++j) acc[j] = 0.0f;
#pragma unroll
  for (int i = 0; i < KV; ++i) {
    const bool in = lane + 32 * i < k;
#pragma unroll
    for (int j = 0; j < NMAX; ++j) acc[j] = in ? fmaf(xv[i], ws[j * KP + lane + 32 * i], acc[j]) : acc[j];
  }
  const float out = lanes_sum_to_lane<NMAX>(acc, n, lane);
  const float z = lane < n ? (b ? out + b[lane] : out) : 0.0f;
  if (lane < n) logits[row * n + lane] = z;
  float l, h, d;
  softmax_xent_lanes(z, label, n, eps, xent_inv_m(scalars, m), &l, &h, &d);
  if (lane < n) dlogits[row * n + lane] = d;
  if (lane == 0) row_loss[row] = l, row_hit[row] = h;
  // The input gradient from the row's gradient on every lane: classes in order (as column_dot), then the
  // previous layer's relu mask.
  float dr[NMAX];
#pragma unroll
  for (int j = 0; j < NMAX; ++j) dr[j] = __shfl_sync(0xffffffffu, d, j);
#pragma unroll
  for (int i = 0; i < KV; ++i) {
    const int c = lane + 32 * i;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < NMAX; ++j) s = j < n ? fmaf(dr[j], ws[j * KP + c], s) : s;
    if (mask) s = xv[i] > 0.0f ? s : 0.0f;
    if (c < k) dx[row * k + c] = s;
  }
}

template <int NMAX, int KV>
void launch_regs(unsigned blocks, cudaStream_t s, const float* x, const float* w, const float* b,
                 const int32_t* labels, float* logits, float* dlogits, float* dx, int64_t m, int n, int64_t k,
                 float eps, const FrStepScalars* scalars, float* row_loss, float* row_hit, bool mask) {
  static_assert(NMAX * 32 * KV * sizeof(float) <= (48u << 10), "padded w must fit the default shared memory");
  fc_softmax_xent_regs_kernel<NMAX, KV><<<blocks, kHeadWarps * 32, 0, s>>>(
      x, w, b, labels, logits, dlogits, dx, m, n, static_cast<int>(k), eps, scalars, row_loss, row_hit, mask);
}

// The general kernel, launched through small_fc's dispatch of register widths.
template <int NMAX>
struct LaunchHead {
  static void run(unsigned blocks, cudaStream_t s, const float* x, const float* w, const float* b,
                  const int32_t* labels, float* logits, float* dlogits, float* dx, int64_t m, int n,
                  int64_t k, float eps, const FrStepScalars* scalars, float* row_loss, float* row_hit,
                  bool mask) {
    const uint64_t shared = shared_weight_bytes(n, k);
    fc_softmax_xent_kernel<NMAX><<<blocks, kHeadWarps * 32, shared, s>>>(
        x, w, b, labels, logits, dlogits, dx, m, n, k, eps, scalars, row_loss, row_hit, mask, shared > 0);
  }
};

// The register kernel where its padded w fits (k <= 512; up to 16 classes, or 32 for k <= 256), else the
// general one. Both give the same bits.
template <class... A>
void launch_head(int n, int64_t k, A... a) {
  if (k <= 256) {
    if (n <= 8) return launch_regs<8, 8>(a...);
    if (n <= 12) return launch_regs<12, 8>(a...);
    if (n <= 16) return launch_regs<16, 8>(a...);
    return launch_regs<32, 8>(a...);
  }
  if (k <= 512) {
    if (n <= 8) return launch_regs<8, 16>(a...);
    if (n <= 12) return launch_regs<12, 16>(a...);
    if (n <= 16) return launch_regs<16, 16>(a...);
  }
  dispatch<LaunchHead>(n, a...);
}
}  // namespace

FR_CUDA_KERNEL_PREPARE(fc_softmax_xent) {
  return sdk::guard([&] {
    sdk::expect_arity(call, 3, 3, 0, 1, "fc_softmax_xent");
    // Its sums run in small_fc's order; with small_fc off the separate head would round differently.
    FR_PLUGIN_CHECK(small_fc_fits(ctx_of(ctx), sdk::rows(call->in[1])), FR_ERR_UNSUPPORTED,
                    "cuda fc_softmax_xent: needs the small-fc kernels (FRESCO_CUDA_SMALL_FC=1, at most 32 "
                    "classes); compile with fuse_head off instead");
    *state = nullptr;
    *workspace_bytes = sdk::xent_workspace_bytes(call);
  });
}

FR_CUDA_KERNEL_RUN(fc_softmax_xent) {
  return sdk::guard([&] {
    const auto& p = sdk::params<FrFcSoftmaxXentParams>(call);
    const sdk::FcXentShape sh = sdk::fc_xent_shape(call);
    float* row_loss = static_cast<float*>(call->workspace);
    float* row_hit = row_loss + sh.m;
    const int n = static_cast<int>(sh.n);
    const float* b = p.has_bias ? sdk::data<float>(call->in[3]) : nullptr;
    cudaStream_t s = stream_of(call);
    const unsigned blocks = static_cast<unsigned>((sh.m + kHeadWarps - 1) / kHeadWarps);
    launch_head(n, sh.k, blocks, s, sdk::data<float>(call->in[0]), sdk::data<float>(call->in[1]), b,
                sdk::data<int32_t>(call->in[2]), sdk::data<float>(call->out[0]),
                sdk::data<float>(call->out[1]), sdk::data<float>(call->out[2]), sh.m, n, sh.k,
                p.label_smoothing, sh.ls, row_loss, row_hit, p.mask_input != 0);
    FR_CUDA_LAUNCH_CHECK();
    launch_batch_sum(ctx_of(ctx), row_loss, row_hit, sh.m, static_cast<FrBatchResults*>(call->rout[0].data),
                     s);
  });
}

}  // namespace fresco::cuda
