// Small memset nodes of a captured graph become kernel nodes (plugins/cuda/graph/memset_nodes.cu).
//
// cuDNN zeroes its statistics outputs and a workspace counter with cudaMemsetAsync inside its execute call,
// so a captured ResNet step holds dozens of memset nodes of 4 bytes to 2 KiB, most on the critical path. On
// the H200 each cost about 4 us between its neighbours (1.5 us to run plus launch gaps around it), where a
// kernel node after a kernel starts within 0.1 us (CUPTI timeline, docs/performance.md). The pass replaces
// each run of such memsets (a chain: each the only dependent of the one before) with one kernel node that
// writes the same values, with the chain's dependencies and dependents; larger memsets stay memset nodes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace fresco::cuda {

// What replace_small_memsets did.
struct MemsetPassResult {
  int memsets_replaced = 0;  // memset nodes removed
  int kernels_added = 0;     // kernel nodes that took their place
  int programmatic = 0;      // of those, kernels after a programmatic edge (below)
};

// Memsets of at most this many bytes are replaced.
constexpr size_t kSmallMemsetBytes = 64 * 1024;

// Rewrites `graph` in place (before instantiation). A memset whose edges carry anything but plain full
// dependencies is left alone. With `programmatic` (compute capability 9.0 and newer, kernels built for it),
// a replacing kernel whose only dependency is a kernel node follows it by a programmatic edge: it may become
// resident once that kernel's blocks have all called griddepcontrol.launch_dependents (or exited), and
// writes nothing before its griddepcontrol.wait returns, i.e. after that kernel has completed with its
// writes visible (ops/dependent_launch.cuh), so the order of memory accesses is the plain edge's. Throws
// std::runtime_error naming the CUDA call that failed.
MemsetPassResult replace_small_memsets(cudaGraph_t graph, bool programmatic = false);

}  // namespace fresco::cuda
