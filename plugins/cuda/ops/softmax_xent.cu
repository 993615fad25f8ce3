// CUDA fused softmax cross-entropy (mean over the batch, PyTorch label smoothing), forward + backward: one
// warp per row writes the row's loss and top-1 hit to the workspace, then one block sums them in a fixed
// order (deterministic). A label outside [0, C) makes the batch loss NaN instead of reading out of bounds.
// With the step scalars as rin the gradient is multiplied by their loss_scale. Test: tests/plugins/cuda.
#include "fresco/softmax_xent_geometry.hpp"
#include "ops/softmax_xent_rows.cuh"

namespace fresco::cuda {

namespace {
// Many rows: one warp per row, results to the workspace, summed by softmax_xent_sum.
__global__ void __launch_bounds__(kRowThreads)
    softmax_xent_rows(const float* __restrict__ z, const int32_t* __restrict__ y, float* __restrict__ dz,
                      int64_t m, int64_t c, float eps, const FrStepScalars* scalars,
                      float* __restrict__ row_loss, float* __restrict__ row_hit) {
  allow_dependent_launch();  // softmax_xent_sum waits for this kernel's rows
  const int64_t r = (static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x) >> 5;
  if (r >= m) return;
  float l, h;
  softmax_xent_row(z, y, dz, r, m, c, eps, scalars, &l, &h);
  if ((threadIdx.x & 31) == 0) row_loss[r] = l, row_hit[r] = h;
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
    launch_batch_sum(ctx_of(ctx), row_loss, row_hit, m, static_cast<FrBatchResults*>(call->rout[0].data),
                     stream_of(call));
  });
}

}  // namespace fresco::cuda
