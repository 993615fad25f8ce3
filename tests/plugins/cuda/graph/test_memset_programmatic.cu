// plugins/cuda/graph/memset_nodes.cu with programmatic edges (replace_small_memsets(graph, true)): a small
// memset after a kernel that allows its dependents at its start and then writes the same bytes late becomes
// a kernel after a programmatic edge, and its values still land after the kernel's (the replacing kernel
// waits for it); after a non-kernel node the edge stays plain. Skips without a GPU (and, below compute
// capability 9.0, checks only the plain form).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "graph/memset_nodes.h"
#include "plugins/cuda/cuda_device_test.h"

namespace fresco::cuda {
namespace {

// Lets its dependents launch, spins for about `cycles`, then writes `value` over n bytes.
__global__ void late_writer(uint8_t* p, int n, uint8_t value, long long cycles) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = value;
}

int compute_major() {
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  return major;
}

TEST(CudaGraphMemsets, AMemsetAfterAKernelFollowsItByAProgrammaticEdge) {
  REQUIRE_GPU();
  const bool programmatic = compute_major() >= 9;
  constexpr int kBytes = 4096;
  uint8_t *buf = nullptr, *copy = nullptr;
  CUDA_OK(cudaMalloc(&buf, kBytes));
  CUDA_OK(cudaMalloc(&copy, kBytes));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  late_writer<<<1, 256, 0, s>>>(buf, kBytes, 0x77, 2000000);  // about 1 ms at the H200's clocks
  CUDA_OK(cudaMemsetAsync(buf, 0x01, 1024, s));               // over the kernel's first bytes
  CUDA_OK(cudaMemsetAsync(buf + 2048, 0x02, 512, s));         // a second job of the same kernel
  CUDA_OK(cudaMemcpyAsync(copy, buf, kBytes, cudaMemcpyDeviceToDevice, s));
  CUDA_OK(cudaMemsetAsync(buf + 3072, 0x03, 256, s));  // after the copy: stays a plain edge
  cudaGraph_t g = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &g));
  const MemsetPassResult r = replace_small_memsets(g, programmatic);
  EXPECT_EQ(r.memsets_replaced, 3);
  EXPECT_EQ(r.kernels_added, 2);
  EXPECT_EQ(r.programmatic, programmatic ? 1 : 0);
  // and the graph holds that edge: one kernel node whose incoming edge is programmatic
  size_t count = 0;
  CUDA_OK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_OK(cudaGraphGetNodes(g, nodes.data(), &count));
  int programmatic_edges = 0;
  for (cudaGraphNode_t n : nodes) {
    size_t deps = 0;
    CUDA_OK(cudaGraphNodeGetDependencies(n, nullptr, nullptr, &deps));
    std::vector<cudaGraphNode_t> from(deps);
    std::vector<cudaGraphEdgeData> edges(deps);
    if (deps) CUDA_OK(cudaGraphNodeGetDependencies(n, from.data(), edges.data(), &deps));
    for (const cudaGraphEdgeData& e : edges)
      programmatic_edges += e.type == cudaGraphDependencyTypeProgrammatic;
  }
  EXPECT_EQ(programmatic_edges, programmatic ? 1 : 0);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  std::vector<uint8_t> want(kBytes, 0x77);
  for (int i = 0; i < 1024; ++i) want[i] = 0x01;
  for (int i = 2048; i < 2560; ++i) want[i] = 0x02;
  for (int replay = 0; replay < 3; ++replay) {
    CUDA_OK(cudaMemset(buf, 0xA5, kBytes));
    CUDA_OK(cudaMemset(copy, 0xEE, kBytes));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    std::vector<uint8_t> got(kBytes), got_copy(kBytes);
    CUDA_OK(cudaMemcpy(got.data(), buf, kBytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_copy.data(), copy, kBytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_copy, want) << "replay " << replay << ": the memsets did not follow the kernel's writes";
    for (int i = 3072; i < 3328; ++i) want[i] = 0x03;
    EXPECT_EQ(got, want) << "replay " << replay;
    for (int i = 3072; i < 3328; ++i) want[i] = 0x77;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(copy);
  cudaFree(buf);
}

}  // namespace
}  // namespace fresco::cuda
