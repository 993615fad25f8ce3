// CUDA kernels of the swish op library (compiled when the example's build finds a CUDA compiler): the same
// forward y = x * sigmoid(x) and backward dx = dy * (s + x s (1 - s)) on the "cuda" device, enqueued on the
// call's stream. fresco-plugin-check compares the backward with finite differences of this forward on the
// GPU.
#include <cuda_runtime.h>

#include "fresco/plugin.hpp"

namespace {
using namespace fresco;

__device__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

__global__ void swish_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * sigmoid(x[i]);
}

__global__ void swish_backward_kernel(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float s = sigmoid(x[i]);
    dx[i] = dy[i] * (s + x[i] * s * (1.0f - s));
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(n < 256 * 1024 ? (n + 255) / 256 : 1024);
}

void check_launch(const char* op) {
  const cudaError_t e = cudaGetLastError();
  FR_PLUGIN_CHECK(e == cudaSuccess, FR_ERR_DEVICE, std::string(op) + ": " + cudaGetErrorString(e));
}
}  // namespace

FrError* swish_cuda_run(void*, const FrCall* c) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(c, 1, 1, 0, 0, "swish");
    const int64_t n = sdk::numel(c->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(c->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "swish: in/out sizes differ");
    swish_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(c->stream)>>>(
        sdk::data<float>(c->in[0]), sdk::data<float>(c->out[0]), n);
    check_launch("swish");
  });
}

FrError* swish_backward_cuda_run(void*, const FrCall* c) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(c, 3, 1, 0, 0, "swish_backward");
    const int64_t n = sdk::numel(c->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(c->in[1]) == n && sdk::numel(c->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "swish_backward: sizes differ");
    swish_backward_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(c->stream)>>>(
        sdk::data<float>(c->in[0]), sdk::data<float>(c->in[1]), sdk::data<float>(c->out[0]), n);
    check_launch("swish_backward");
  });
}
