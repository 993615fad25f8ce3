// Programmatic dependent launch (compute capability 9.0 and newer; no-ops before): a kernel launched with
// launch_after_prior (cudaLaunchAttributeProgrammaticStreamSerialization) may start while the kernel before
// it on its stream still runs, once every block of that kernel has called allow_dependent_launch (or
// exited); it must call wait_for_prior_kernels before it touches anything that kernel reads or writes. In
// a captured graph the edge between the two becomes a programmatic one.
#pragma once

#include "cuda_common.h"

namespace fresco::cuda {

// Lets a dependent kernel launched with launch_after_prior start early (its stores wait for this kernel).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the kernels before this one on its stream have finished and their writes are visible.
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, 0, s>>>(args...) as a programmatic dependent of the kernel before it where
// the device supports that (ctx->dependent_launch), else (or with a null ctx) as a plain launch.
template <class... P, class... A>
void launch_after_prior(const Context* ctx, void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t s,
                        A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = ctx && ctx->dependent_launch ? 1 : 0;
  FR_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

}  // namespace fresco::cuda
