// plugins/cuda/graph/memset_nodes.cu run directly on captured graphs: small memsets (1-, 2- and 4-byte
// elements, pitched rows, a chain, one that rewrites bytes an earlier one wrote, memsets on a forked stream)
// become kernel nodes that write the same bytes in the same order, a large memset stays a memset node, and a
// copy captured after them still sees their values. Buffers are poisoned before every replay. Skips without a
// GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include <cuda_runtime.h>

#include "graph/memset_nodes.h"
#include "plugins/cuda/cuda_device_test.h"

namespace fresco::cuda {
namespace {

std::map<cudaGraphNodeType, int> node_types(cudaGraph_t g) {
  size_t n = 0;
  cudaGraphGetNodes(g, nullptr, &n);
  std::vector<cudaGraphNode_t> nodes(n);
  cudaGraphGetNodes(g, nodes.data(), &n);
  std::map<cudaGraphNodeType, int> types;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    cudaGraphNodeGetType(node, &t);
    ++types[t];
  }
  return types;
}

// What the captured work below leaves in a buffer of `bytes` that starts as `poison`.
struct Expected {
  std::vector<uint8_t> bytes;
  void fill(size_t offset, size_t pitch, size_t width, size_t height, uint32_t value, int element) {
    for (size_t r = 0; r < height; ++r)
      for (size_t c = 0; c < width; ++c)
        std::memcpy(&bytes[offset + r * pitch + c * element], &value, element);  // little-endian low bytes
  }
};

cudaGraphNode_t add_memset(cudaGraph_t g, std::vector<cudaGraphNode_t> deps, Expected& want, uint8_t* base,
                           size_t offset, size_t pitch, size_t width, size_t height, uint32_t value,
                           int element) {
  cudaMemsetParams p{};
  p.dst = base + offset;
  p.pitch = pitch;
  p.value = value;
  p.elementSize = static_cast<unsigned>(element);
  p.width = width;
  p.height = height;
  cudaGraphNode_t n = nullptr;
  EXPECT_EQ(cudaGraphAddMemsetNode(&n, g, deps.data(), deps.size(), &p), cudaSuccess);
  want.fill(offset, pitch, width, height, value, element);
  return n;
}

// Poisons the buffers, replays `exec`, and compares them with `want` (the copy holds want's first bytes).
void replay_and_check(cudaGraphExec_t exec, cudaStream_t s, uint8_t* buf, size_t bytes, uint8_t* copy,
                      size_t copy_bytes, const Expected& want) {
  for (int replay = 0; replay < 2; ++replay) {
    CUDA_OK(cudaMemset(buf, 0xA5, bytes));
    CUDA_OK(cudaMemset(copy, 0xEE, copy_bytes));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaGraphLaunch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
    std::vector<uint8_t> got(bytes), got_copy(copy_bytes);
    CUDA_OK(cudaMemcpy(got.data(), buf, bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_copy.data(), copy, copy_bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < bytes; ++i)
      if (got[i] != want.bytes[i] && wrong++ == 0) first = i;
    EXPECT_EQ(wrong, 0u) << "replay " << replay << ": first wrong byte at " << first;
    EXPECT_EQ(std::memcmp(got_copy.data(), want.bytes.data(), copy_bytes), 0)
        << "the copy ran before the memsets";
  }
}

TEST(CudaGraphMemsets, SmallMemsetsBecomeKernelsWithTheSameResult) {
  REQUIRE_GPU();
  constexpr size_t kBytes = 1 << 20, kLarge = 256 * 1024, kCopy = 4096;
  uint8_t *buf = nullptr, *copy = nullptr;
  CUDA_OK(cudaMalloc(&buf, kBytes));
  CUDA_OK(cudaMalloc(&copy, kCopy));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Expected want{std::vector<uint8_t>(kBytes, 0xA5)};
  cudaGraph_t g = nullptr;
  CUDA_OK(cudaGraphCreate(&g, 0));
  // m1 -> m2 -> m3 -> m4 -> large -> copy, and m4 -> m5 -> m6 -> large. m4 rewrites bytes m1 wrote, so it
  // must not share m1's kernel; m4 has two dependents, so the chain ends there; m5 -> m6 is a chain.
  cudaGraphNode_t m1 = add_memset(g, {}, want, buf, 0, 0, 100, 1, 0x01020304u, 4);
  cudaGraphNode_t m2 = add_memset(g, {m1}, want, buf, 1000, 0, 333, 1, 0x7f, 1);
  cudaGraphNode_t m3 = add_memset(g, {m2}, want, buf, 2000, 64, 24, 5, 0x11, 1);
  cudaGraphNode_t m4 = add_memset(g, {m3}, want, buf, 40, 0, 40, 1, 0xBEEF, 2);
  cudaGraphNode_t m5 = add_memset(g, {m4}, want, buf, 8192, 0, 1024, 1, 0x3c3c3c3cu, 4);
  cudaGraphNode_t m6 = add_memset(g, {m5}, want, buf, 3000, 256, 7, 3, 0x1234, 2);
  cudaGraphNode_t large = add_memset(g, {m4, m6}, want, buf, kBytes - kLarge, 0, kLarge, 1, 0x66, 1);
  cudaGraphNode_t cp = nullptr;
  CUDA_OK(cudaGraphAddMemcpyNode1D(&cp, g, &large, 1, copy, buf, kCopy, cudaMemcpyDeviceToDevice));

  ASSERT_EQ(node_types(g).at(cudaGraphNodeTypeMemset), 7);
  const MemsetPassResult r = replace_small_memsets(g);
  EXPECT_EQ(r.memsets_replaced, 6);
  EXPECT_EQ(r.kernels_added, 3);  // m1-m3, m4, m5-m6
  const auto after = node_types(g);
  EXPECT_EQ(after.at(cudaGraphNodeTypeMemset), 1);
  EXPECT_EQ(after.at(cudaGraphNodeTypeKernel), 3);
  EXPECT_EQ(after.at(cudaGraphNodeTypeMemcpy), 1);
  // The large memset still waits for both branches.
  size_t deps = 0;
  CUDA_OK(cudaGraphNodeGetDependencies(large, nullptr, nullptr, &deps));
  EXPECT_EQ(deps, 2u);

  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  replay_and_check(exec, s, buf, kBytes, copy, kCopy, want);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(copy);
  cudaFree(buf);
}

TEST(CudaGraphMemsets, CapturedMemsetsOnForkedStreams) {
  REQUIRE_GPU();
  constexpr size_t kBytes = 64 * 1024, kCopy = 32 * 1024;
  uint8_t *buf = nullptr, *copy = nullptr;
  CUDA_OK(cudaMalloc(&buf, kBytes));
  CUDA_OK(cudaMalloc(&copy, kCopy));
  cudaStream_t s = nullptr, side = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t fork = nullptr, join = nullptr;
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  Expected want{std::vector<uint8_t>(kBytes, 0xA5)};
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(cudaMemsetAsync(buf, 0x01, 256, s));
  want.fill(0, 0, 256, 1, 0x01, 1);
  CUDA_OK(cudaEventRecord(fork, s));
  CUDA_OK(cudaStreamWaitEvent(side, fork, 0));
  CUDA_OK(cudaMemsetAsync(buf + 4096, 0x3c, 4096, side));
  want.fill(4096, 0, 4096, 1, 0x3c, 1);
  CUDA_OK(cudaMemsetAsync(buf + 100, 0x5a, 17, side));  // over bytes the first memset wrote
  want.fill(100, 0, 17, 1, 0x5a, 1);
  CUDA_OK(cudaMemsetAsync(buf + 20000, 0x77, 999, s));
  want.fill(20000, 0, 999, 1, 0x77, 1);
  CUDA_OK(cudaEventRecord(join, side));
  CUDA_OK(cudaStreamWaitEvent(s, join, 0));
  CUDA_OK(cudaMemcpyAsync(copy, buf, kCopy, cudaMemcpyDeviceToDevice, s));
  cudaGraph_t g = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &g));
  const MemsetPassResult r = replace_small_memsets(g);
  EXPECT_EQ(r.memsets_replaced, 4);
  EXPECT_EQ(node_types(g).count(cudaGraphNodeTypeMemset), 0u);
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
  replay_and_check(exec, s, buf, kBytes, copy, kCopy, want);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(side);
  cudaStreamDestroy(s);
  cudaFree(copy);
  cudaFree(buf);
}

TEST(CudaGraphMemsets, AGraphWithoutMemsetsIsLeftAlone) {
  REQUIRE_GPU();
  void *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, 1024));
  CUDA_OK(cudaMalloc(&b, 1024));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CUDA_OK(cudaMemcpyAsync(b, a, 1024, cudaMemcpyDeviceToDevice, s));
  cudaGraph_t g = nullptr;
  CUDA_OK(cudaStreamEndCapture(s, &g));
  const MemsetPassResult r = replace_small_memsets(g);
  EXPECT_EQ(r.memsets_replaced, 0);
  EXPECT_EQ(r.kernels_added, 0);
  EXPECT_EQ(node_types(g).size(), 1u);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
}

}  // namespace
}  // namespace fresco::cuda
