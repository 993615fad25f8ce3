// The swish op library: y = x * sigmoid(x), and its backward dx = dy * (s + x * s * (1 - s)), s = sigmoid(x).
// Declares the op schema (one input, one output, same shape, backward op "swish_backward") and CPU kernels
// for both; no device API (it runs on the CPU backend's device). Checked by fresco-plugin-check (finite
// differences).
#include <cmath>

#include "fresco/plugin.hpp"

namespace {
using namespace fresco;

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

FrError* swish_run(void*, const FrCall* c) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(c, 1, 1, 0, 0, "swish");
    const int64_t n = sdk::numel(c->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(c->out[0]) == n, FR_ERR_INVALID_ARGUMENT, "swish: in/out sizes differ");
    const float* x = sdk::data<float>(c->in[0]);
    float* y = sdk::data<float>(c->out[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
  });
}

FrError* swish_backward_run(void*, const FrCall* c) noexcept {
  return sdk::guard([&] {
    sdk::expect_arity(c, 3, 1, 0, 0, "swish_backward");  // {dy, x, y} -> {dx}
    const int64_t n = sdk::numel(c->in[0]);
    FR_PLUGIN_CHECK(sdk::numel(c->in[1]) == n && sdk::numel(c->out[0]) == n, FR_ERR_INVALID_ARGUMENT,
                    "swish_backward: sizes differ");
    const float* dy = sdk::data<float>(c->in[0]);
    const float* x = sdk::data<float>(c->in[1]);
    float* dx = sdk::data<float>(c->out[0]);
    for (int64_t i = 0; i < n; ++i) {
      const float s = sigmoid(x[i]);
      dx[i] = dy[i] * (s + x[i] * s * (1.0f - s));
    }
  });
}

#ifdef SWISH_WITH_CUDA
}  // namespace
FrError* swish_cuda_run(void*, const FrCall* c) noexcept;  // swish_cuda.cu
FrError* swish_backward_cuda_run(void*, const FrCall* c) noexcept;
namespace {
#endif

const FrKernelDef kKernels[] = {
    {sizeof(FrKernelDef), FR_COMPUTE, "swish", "cpu", FR_DTYPE_BIT(FR_F32), 0, nullptr, swish_run, nullptr},
    {sizeof(FrKernelDef), FR_COMPUTE, "swish_backward", "cpu", FR_DTYPE_BIT(FR_F32), 0, nullptr,
     swish_backward_run, nullptr},
#ifdef SWISH_WITH_CUDA
    {sizeof(FrKernelDef), FR_COMPUTE, "swish", "cuda", FR_DTYPE_BIT(FR_F32), 0, nullptr, swish_cuda_run,
     nullptr},
    {sizeof(FrKernelDef), FR_COMPUTE, "swish_backward", "cuda", FR_DTYPE_BIT(FR_F32), 0, nullptr,
     swish_backward_cuda_run, nullptr},
#endif
};
const FrOpSchema kSchemas[] = {{sizeof(FrOpSchema), 0, 1, 1, "swish", "swish_backward", nullptr, nullptr}};
}  // namespace

extern "C" FR_EXPORT FrAbiInfo fresco_plugin_abi(void) {
  return FrAbiInfo{sizeof(FrAbiInfo), FR_ABI_MAJOR, FR_ABI_MINOR, "swish", "1.0"};
}

extern "C" FR_EXPORT FrError* fresco_plugin_init(const FrHostApi* host, FrPlugin* out) {
  // an op library: kernels and the schema of the op it adds, no device API
  return fresco::sdk::init_plugin(
      host, out, "swish_op",
      {nullptr, nullptr, kKernels, sizeof(kKernels) / sizeof(kKernels[0]), kSchemas, 1});
}
