// fp32 NHWC forward convolutions on XNNPACK where they measured faster than the backend's packed GEMM: few
// taps per group (R S C/g <= 32, a network's stem), where im2col + GEMM has a depth too short to fill its
// micro-kernels (ResNet-18's CIFAR stem at batch 32 on two cores: 4.46 ms against 0.73 on XNNPACK with its
// operator created in the call; docs/decisions.md). XNNPACK packs the weights when an operator is created,
// and training changes them every step, so each call creates, sets up, runs and deletes one operator; its
// allocations go to an arena in the call's workspace, one block of images at a time (a process-wide XNNPACK
// allocator that bump-allocates from the arena the calling thread has set), so a run never touches the heap.
// The arena's size comes from a dry run at prepare. Results do not depend on the thread count (every output
// comes from one dot product over all taps) and the workers flush denormals as the backend's arena does.
// Test: tests/plugins/cpu/test_xnn_conv.cpp.
#pragma once

#include <cstdint>

#include "fresco/conv_geometry.hpp"

namespace fresco::cpu {

// Whether the convolution takes the XNNPACK path: fp32 forward, at most 32 taps per group, and
// FRESCO_CPU_XNNPACK not 0 (read at each call: prepare decides, run follows prepare's choice).
bool xnn_conv_wanted(const sdk::ConvShape& g);

// Bytes of workspace (a multiple of 64) a call of this shape, with any number of images, needs for
// XNNPACK's allocations, found by creating and setting up an operator for one block of images (at prepare;
// it allocates); 0 when XNNPACK cannot be used here (it did not initialise, or its allocations do not reach
// this library's allocator), and the caller then keeps its own path.
uint64_t xnn_conv_arena_bytes(const sdk::ConvShape& g, bool bias, int threads);

// y = conv(x, w) (+ b when not null), with XNNPACK's allocations in arena[0, arena_bytes) (64-byte aligned,
// sized by xnn_conv_arena_bytes for this shape), on the thread pool the first prepare created with its
// `threads` workers.
void xnn_conv_forward(const sdk::ConvShape& g, const float* x, const float* w, const float* b, float* y,
                      void* arena, uint64_t arena_bytes);

// Heap allocations XNNPACK made through this library's allocator with no arena set (tests: 0 over a run).
uint64_t xnn_conv_heap_allocations();

}  // namespace fresco::cpu
