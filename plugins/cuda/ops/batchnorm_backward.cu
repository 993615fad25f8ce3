// CUDA batchnorm backward (training mode) with the CPU kernel's formula (batchnorm_backward.cpp):
// dbeta = sum(dy), dgamma = sum(dy * (x - mean)) * invstd, dx = a (dy - dbeta / n - (x - mean) k) with
// a = gamma invstd and k = dgamma invstd / n. One block per channel (double sums, fixed tree), so the result
// is deterministic and dx may alias dy. Test: tests/plugins/cuda/test_cuda_ops.cpp (against the CPU kernel).
#include "cuda_common.h"
#include "ops/block_reduce.cuh"

namespace fresco::cuda {

namespace {
__global__ void bn_backward_kernel(const float* dy, const float* x, const float* gamma, const float* mean,
                                   const float* invstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                                   int64_t c) {
  __shared__ double buf[kReduceThreads];
  const int64_t k = blockIdx.x;
  const float m = mean[k];
  double sdy = 0.0, sdyx = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads) {
    const float g = dy[i * c + k];
    sdy += g;
    sdyx += static_cast<double>(g) * (static_cast<double>(x[i * c + k]) - m);
  }
  const double db = block_sum(sdy, buf);
  const double dyx = block_sum(sdyx, buf);
  const double n = static_cast<double>(rows), is = invstd[k];
  const double dg = dyx * is;
  const float a = static_cast<float>(gamma[k] * is), b = static_cast<float>(db / n),
              kk = static_cast<float>(dg * is / n);
  if (threadIdx.x == 0) {
    dgamma[k] = static_cast<float>(dg);
    dbeta[k] = static_cast<float>(db);
  }
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads)
    dx[i * c + k] = a * (dy[i * c + k] - b - (x[i * c + k] - m) * kk);
}

void check_vec(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm_backward: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements, expected C = " + std::to_string(c));
}
}  // namespace

FR_CUDA_KERNEL_RUN(batchnorm_backward) {
  (void)ctx;
  return sdk::guard([&] {
    sdk::expect_arity(call, 5, 3, 0, 0, "batchnorm_backward");
    const FrTensor& xt = call->in[1];
    FR_PLUGIN_CHECK(xt.ndim >= 1 && xt.ndim <= 4, FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: bad ndim");
    const int64_t c = xt.dims[xt.ndim - 1];
    FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: no channels");
    const int64_t rows = sdk::numel(xt) / c;
    FR_PLUGIN_CHECK(sdk::numel(call->in[0]) == rows * c && sdk::numel(call->out[0]) == rows * c,
                    FR_ERR_INVALID_ARGUMENT, "batchnorm_backward: dy, x and dx sizes differ");
    check_vec(call->in[2], c, "gamma");
    check_vec(call->in[3], c, "save_mean");
    check_vec(call->in[4], c, "save_invstd");
    check_vec(call->out[1], c, "dgamma");
    check_vec(call->out[2], c, "dbeta");
    bn_backward_kernel<<<static_cast<unsigned>(c), kReduceThreads, 0, stream_of(call)>>>(
        sdk::data<float>(call->in[0]), sdk::data<float>(xt), sdk::data<float>(call->in[2]),
        sdk::data<float>(call->in[3]), sdk::data<float>(call->in[4]), sdk::data<float>(call->out[0]),
        sdk::data<float>(call->out[1]), sdk::data<float>(call->out[2]), rows, c);
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
