// CUDA batchnorm forward with the CPU kernel's semantics (plugins/cpu/ops/batchnorm.cpp, PyTorch
// BatchNorm2d): training normalises with the batch mean (kept in float, as the backward sees it) and the
// biased variance (two passes, double sums) and moves running_mean/var by momentum with the unbiased
// variance; inference uses the running statistics. One block per channel owns that channel's column of the
// [rows, C] view, so the sums are deterministic and y may alias x. The strided column reads are not
// coalesced: correct first; a tiled kernel is future work. Test: tests/plugins/cuda/test_cuda_ops.cpp
// (against the CPU kernel).
#include <cmath>

#include "cuda_common.h"
#include "ops/block_reduce.cuh"

namespace fresco::cuda {

namespace {
__global__ void bn_train_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                float* save_mean, float* save_invstd, float* run_mean, float* run_var,
                                int64_t rows, int64_t c, float eps, float momentum) {
  __shared__ double buf[kReduceThreads];
  const int64_t k = blockIdx.x;
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads) acc += x[i * c + k];
  const double n = static_cast<double>(rows);
  const float mean = static_cast<float>(block_sum(acc, buf) / n);
  acc = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads) {
    const double d = static_cast<double>(x[i * c + k]) - mean;
    acc += d * d;
  }
  const double var = block_sum(acc, buf) / n;
  const double invstd = 1.0 / sqrt(var + static_cast<double>(eps));
  const float scale = static_cast<float>(gamma[k] * invstd);
  const float b = beta[k];
  if (threadIdx.x == 0) {
    save_mean[k] = mean;
    save_invstd[k] = static_cast<float>(invstd);
    const double mom = momentum;
    run_mean[k] = static_cast<float>((1.0 - mom) * run_mean[k] + mom * mean);
    run_var[k] = static_cast<float>((1.0 - mom) * run_var[k] + mom * var * n / (n - 1.0));
  }
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads)
    y[i * c + k] = (x[i * c + k] - mean) * scale + b;
}

__global__ void bn_infer_kernel(const float* x, const float* gamma, const float* beta, const float* rm,
                                const float* rv, float* y, int64_t rows, int64_t c, float eps) {
  const int64_t k = blockIdx.x;
  const float scale = static_cast<float>(gamma[k] / sqrt(static_cast<double>(rv[k]) + eps));
  const float shift = rm[k], b = beta[k];
  for (int64_t i = threadIdx.x; i < rows; i += kReduceThreads)
    y[i * c + k] = (x[i * c + k] - shift) * scale + b;
}

void check_vec(const FrTensor& t, int64_t c, const char* what) {
  FR_PLUGIN_CHECK(sdk::numel(t) == c, FR_ERR_INVALID_ARGUMENT,
                  std::string("batchnorm: ") + what + " has " + std::to_string(sdk::numel(t)) +
                      " elements, expected C = " + std::to_string(c));
}
}  // namespace

FR_CUDA_KERNEL_RUN(batchnorm) {
  (void)ctx;
  return sdk::guard([&] {
    const auto& p = sdk::params<FrBatchNormParams>(call);
    if (p.training)
      sdk::expect_arity(call, 3, 3, 0, 2, "batchnorm (training)");
    else
      sdk::expect_arity(call, 5, 1, 0, 0, "batchnorm (inference)");
    const FrTensor& xt = call->in[0];
    FR_PLUGIN_CHECK(xt.ndim >= 1 && xt.ndim <= 4, FR_ERR_INVALID_ARGUMENT, "batchnorm: bad ndim");
    const int64_t c = xt.dims[xt.ndim - 1];
    FR_PLUGIN_CHECK(c >= 1, FR_ERR_INVALID_ARGUMENT, "batchnorm: no channels");
    const int64_t rows = sdk::numel(xt) / c;
    FR_PLUGIN_CHECK(sdk::numel(call->out[0]) == rows * c, FR_ERR_INVALID_ARGUMENT,
                    "batchnorm: x and y sizes differ");
    FR_PLUGIN_CHECK(p.eps >= 0.0f && std::isfinite(p.eps), FR_ERR_INVALID_ARGUMENT, "batchnorm: bad eps");
    check_vec(call->in[1], c, "gamma");
    check_vec(call->in[2], c, "beta");
    const auto blocks = static_cast<unsigned>(c);
    if (p.training) {
      check_vec(call->out[1], c, "save_mean");
      check_vec(call->out[2], c, "save_invstd");
      FR_PLUGIN_CHECK(call->rout[0].bytes >= static_cast<uint64_t>(c) * sizeof(float) &&
                          call->rout[1].bytes >= static_cast<uint64_t>(c) * sizeof(float),
                      FR_ERR_INVALID_ARGUMENT, "batchnorm: running statistics hold fewer than C floats");
      FR_PLUGIN_CHECK(rows >= 2, FR_ERR_INVALID_ARGUMENT,
                      "batchnorm: training needs more than one value per channel");
      bn_train_kernel<<<blocks, kReduceThreads, 0, stream_of(call)>>>(
          sdk::data<float>(xt), sdk::data<float>(call->in[1]), sdk::data<float>(call->in[2]),
          sdk::data<float>(call->out[0]), sdk::data<float>(call->out[1]), sdk::data<float>(call->out[2]),
          sdk::data<float>(call->rout[0]), sdk::data<float>(call->rout[1]), rows, c, p.eps, p.momentum);
    } else {
      check_vec(call->in[3], c, "running_mean");
      check_vec(call->in[4], c, "running_var");
      bn_infer_kernel<<<blocks, kReduceThreads, 0, stream_of(call)>>>(
          sdk::data<float>(xt), sdk::data<float>(call->in[1]), sdk::data<float>(call->in[2]),
          sdk::data<float>(call->in[3]), sdk::data<float>(call->in[4]), sdk::data<float>(call->out[0]), rows,
          c, p.eps);
    }
    FR_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace fresco::cuda
