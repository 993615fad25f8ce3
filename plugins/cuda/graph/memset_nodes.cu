// Small memset nodes of a captured graph become kernel nodes: see memset_nodes.h. Test:
// tests/plugins/cuda/graph/test_memset_nodes.cpp.
#include "graph/memset_nodes.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fresco::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct FillJob {
  char* dst;
  size_t pitch;  // bytes between rows
  size_t width;  // elements per row
  size_t height;
  uint32_t value;
  uint32_t element;  // 1, 2 or 4 bytes
};

constexpr int kMaxJobs = 8;
struct FillJobs {
  FillJob job[kMaxJobs];
};

// blockIdx.y picks the job; the blocks along x stride over its elements.
__global__ void fill_jobs_kernel(FillJobs jobs) {
  const FillJob j = jobs.job[blockIdx.y];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");  // after a programmatic edge: its kernel is done
#endif
  const size_t n = j.width * j.height;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    char* p = j.dst + (i / j.width) * j.pitch + (i % j.width) * j.element;
    if (j.element == 4)
      *reinterpret_cast<uint32_t*>(p) = j.value;
    else if (j.element == 2)
      *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(j.value);
    else
      *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(j.value);
  }
}

// A full dependency: the upstream node completes, with its writes visible, before the downstream one starts.
bool plain(const cudaGraphEdgeData& e) {
  return e.type == cudaGraphDependencyTypeDefault && e.from_port == 0 && e.to_port == 0;
}

struct Edges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;
  bool all_plain() const {
    for (const auto& d : data)
      if (!plain(d)) return false;
    return true;
  }
};

// A node's incoming (cudaGraphNodeGetDependencies) or outgoing (cudaGraphNodeGetDependentNodes) edges.
using EdgeQuery = cudaError_t (*)(cudaGraphNode_t, cudaGraphNode_t*, cudaGraphEdgeData*, size_t*);
Edges edges(cudaGraphNode_t n, EdgeQuery query, const char* what) {
  Edges e;
  size_t count = 0;
  check(query(n, nullptr, nullptr, &count), what);
  e.nodes.resize(count);
  e.data.resize(count);
  if (count) check(query(n, e.nodes.data(), e.data.data(), &count), what);
  e.nodes.resize(count);
  e.data.resize(count);
  return e;
}
Edges dependencies(cudaGraphNode_t n) {
  return edges(n, cudaGraphNodeGetDependencies, "cudaGraphNodeGetDependencies");
}
Edges dependents(cudaGraphNode_t n) {
  return edges(n, cudaGraphNodeGetDependentNodes, "cudaGraphNodeGetDependentNodes");
}

// A memset node the pass may replace: small, 1/2/4-byte elements, only plain edges.
bool replaceable(cudaGraphNode_t n, cudaMemsetParams* p) {
  cudaGraphNodeType type;
  check(cudaGraphNodeGetType(n, &type), "cudaGraphNodeGetType");
  if (type != cudaGraphNodeTypeMemset) return false;
  check(cudaGraphMemsetNodeGetParams(n, p), "cudaGraphMemsetNodeGetParams");
  if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) return false;
  if (p->width == 0 || p->height == 0) return false;
  const size_t row_bytes = p->width * p->elementSize;
  if (p->height > 1 && p->pitch < row_bytes) return false;
  if (row_bytes * p->height > kSmallMemsetBytes) return false;
  return dependencies(n).all_plain() && dependents(n).all_plain();
}

// The bytes a memset writes lie in [begin, end).
struct Span {
  uintptr_t begin, end;
};
Span span_of(const cudaMemsetParams& p) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p.dst);
  return {b, b + (p.height - 1) * p.pitch + p.width * p.elementSize};
}
bool overlap(const Span& a, const Span& b) {
  return a.begin < b.end && b.begin < a.end;
}

// Whether n is a kernel node.
bool kernel_node(cudaGraphNode_t n) {
  cudaGraphNodeType type;
  check(cudaGraphNodeGetType(n, &type), "cudaGraphNodeGetType");
  return type == cudaGraphNodeTypeKernel;
}

}  // namespace

MemsetPassResult replace_small_memsets(cudaGraph_t graph, bool programmatic) {
  MemsetPassResult result;
  size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  if (count) check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
  std::unordered_map<cudaGraphNode_t, cudaMemsetParams> small;
  for (cudaGraphNode_t n : nodes) {
    cudaMemsetParams p{};
    if (replaceable(n, &p)) small.emplace(n, p);
  }
  // `next` links a small memset to the small memset that is its only dependent, when it is that one's only
  // dependency: such pairs run back to back and can share one kernel.
  std::unordered_map<cudaGraphNode_t, cudaGraphNode_t> next;
  std::unordered_set<cudaGraphNode_t> has_prev;
  for (const auto& [n, p] : small) {
    const Edges out = dependents(n);
    if (out.nodes.size() != 1 || !small.count(out.nodes[0])) continue;
    if (dependencies(out.nodes[0]).nodes.size() != 1) continue;
    next[n] = out.nodes[0];
    has_prev.insert(out.nodes[0]);
  }
  // Chains in node order (deterministic), each cut into kernels of at most kMaxJobs disjoint memsets.
  for (cudaGraphNode_t head : nodes) {
    if (!small.count(head) || has_prev.count(head)) continue;
    std::vector<cudaGraphNode_t> chain{head};
    for (auto it = next.find(head); it != next.end(); it = next.find(it->second)) chain.push_back(it->second);
    size_t i = 0;
    while (i < chain.size()) {
      std::vector<cudaGraphNode_t> group{chain[i]};
      std::vector<Span> spans{span_of(small.at(chain[i]))};
      for (size_t j = i + 1; j < chain.size() && group.size() < kMaxJobs; ++j) {
        const Span s = span_of(small.at(chain[j]));
        bool clash = false;
        for (const Span& t : spans) clash = clash || overlap(s, t);
        if (clash) break;  // a later memset over the same bytes must follow the earlier one
        group.push_back(chain[j]);
        spans.push_back(s);
      }
      FillJobs jobs{};
      size_t most = 0;
      for (size_t k = 0; k < group.size(); ++k) {
        const cudaMemsetParams& p = small.at(group[k]);
        jobs.job[k] = {static_cast<char*>(p.dst), p.pitch, p.width, p.height, p.value, p.elementSize};
        most = std::max(most, p.width * p.height);
      }
      const Edges in = dependencies(group.front());
      const Edges out = dependents(group.back());
      cudaKernelNodeParams kp{};
      kp.func = reinterpret_cast<void*>(fill_jobs_kernel);
      kp.blockDim = dim3(256);
      kp.gridDim = dim3(static_cast<unsigned>(std::min<size_t>((most + 255) / 256, 64)),
                        static_cast<unsigned>(group.size()));
      void* args[] = {&jobs};
      kp.kernelParams = args;
      cudaGraphNode_t kernel = nullptr;
      const bool after_kernel = programmatic && in.nodes.size() == 1 && kernel_node(in.nodes[0]);
      check(cudaGraphAddKernelNode(&kernel, graph, after_kernel ? nullptr : in.nodes.data(),
                                   after_kernel ? 0 : in.nodes.size(), &kp),
            "cudaGraphAddKernelNode");
      if (after_kernel) {
        cudaGraphEdgeData e{};
        e.type = cudaGraphDependencyTypeProgrammatic;
        e.from_port = cudaGraphKernelNodePortProgrammatic;
        check(cudaGraphAddDependencies(graph, &in.nodes[0], &kernel, &e, 1), "cudaGraphAddDependencies");
        ++result.programmatic;
      }
      for (cudaGraphNode_t d : out.nodes)
        check(cudaGraphAddDependencies(graph, &kernel, &d, nullptr, 1), "cudaGraphAddDependencies");
      for (cudaGraphNode_t g : group) check(cudaGraphDestroyNode(g), "cudaGraphDestroyNode");
      result.memsets_replaced += static_cast<int>(group.size());
      ++result.kernels_added;
      i += group.size();
    }
  }
  return result;
}

}  // namespace fresco::cuda
