// Shared helpers of the tests that call CUDA directly (tests/plugins/cuda/ops, tests/plugins/cuda/graph):
// device detection (they skip, never fail, without a GPU) and checks that end the test with what failed.
#pragma once

#include <gtest/gtest.h>

#include <cuda_runtime.h>

namespace fresco::cuda_test {

inline bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace fresco::cuda_test

#define REQUIRE_GPU()                          \
  if (!::fresco::cuda_test::have_gpu()) {      \
    GTEST_SKIP() << "no CUDA device: skipped"; \
  }

// A failed CUDA call ends the calling function (and is reported with what was being done).
#define CHECK_CUDA(expr, what)                                                                  \
  do {                                                                                          \
    const cudaError_t check_cuda_e = (expr);                                                    \
    ASSERT_EQ(check_cuda_e, cudaSuccess) << (what) << ": " << cudaGetErrorString(check_cuda_e); \
  } while (0)
// The same, reporting the call itself.
#define CUDA_OK(expr) CHECK_CUDA(expr, #expr)
