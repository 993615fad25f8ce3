// Hopper (sm_90a) building blocks shared by fresco's own warpgroup-MMA kernels (ops/conv3x3_wgmma.cu) and
// the probe that measured them (bench/conv3x3_probe.cu): wgmma with A from
// registers, its fence / commit / wait, mbarriers, TMA tensor loads and stmatrix. Outside an sm_90a
// compilation the wgmma calls compile to nothing, so a translation unit that includes this header builds for
// any architecture; the host must launch such kernels only on compute capability 9.0 with an sm_90a image
// (conv3x3_wgmma_available). Self-contained (CUDA headers only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fresco::cuda {

__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving accesses of wgmma's accumulators across the wait that completes them.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (+)= a (64 x 16, registers) * b (16 x N, shared-memory descriptor); accumulate = 0 overwrites d.
// FR_WGMMA(NAME, NREG, SHAPE, REGS, PRED, D...) defines NAME(d, a, desc, accumulate, T{}) for both 16-bit
// types.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FR_WGMMA_ASM(SHAPE, TYPE, REGS, PRED, ...)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\nwgmma.mma_async.sync.aligned." SHAPE \
               ".f32." TYPE "." TYPE " " REGS:__VA_ARGS__                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#else
#define FR_WGMMA_ASM(SHAPE, TYPE, REGS, PRED, ...) (void)0
#endif
#define FR_WGMMA(NAME, NREG, SHAPE, REGS, PRED, ...)                                          \
  __device__ __forceinline__ void NAME(float(&d)[NREG], const uint32_t(&a)[4], uint64_t desc, \
                                       int accumulate, __half) {                              \
    FR_WGMMA_ASM(SHAPE, "f16", REGS, PRED, __VA_ARGS__);                                      \
  }                                                                                           \
  __device__ __forceinline__ void NAME(float(&d)[NREG], const uint32_t(&a)[4], uint64_t desc, \
                                       int accumulate, __nv_bfloat16) {                       \
    FR_WGMMA_ASM(SHAPE, "bf16", REGS, PRED, __VA_ARGS__);                                     \
  }
#define FR_WGMMA_D16                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define FR_WGMMA_REGS16 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
FR_WGMMA(wgmma32, 16, "m64n32k16", FR_WGMMA_REGS16, "%21", FR_WGMMA_D16)
// m64n64k16 with both operands from shared memory, both transposed (MN-major: rows of 16 bytes along M or N,
// 8 such rows along K form a core matrix; in the descriptors LBO steps along K, SBO along M or N).
// wgmma64_ss_mn(d, a_desc, b_desc, accumulate, T{}).
#define FR_WGMMA_D32                                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),           \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
      "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
      "+f"(d[30]), "+f"(d[31])
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FR_WGMMA_SS_MN_ASM(TYPE)                                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\nwgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE \
               "." TYPE                                                                                     \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%"  \
               "24,%25,%26,%27,"                                                                            \
               "%28,%29,%30,%31}, %32, %33, p, 1, 1, 1, 1;\n}\n"                                            \
               : FR_WGMMA_D32                                                                               \
               : "l"(a_desc), "l"(b_desc), "r"(accumulate))
#else
#define FR_WGMMA_SS_MN_ASM(TYPE) (void)0
#endif
__device__ __forceinline__ void wgmma64_ss_mn(float (&d)[32], uint64_t a_desc, uint64_t b_desc,
                                              int accumulate, __half) {
  FR_WGMMA_SS_MN_ASM("f16");
}
__device__ __forceinline__ void wgmma64_ss_mn(float (&d)[32], uint64_t a_desc, uint64_t b_desc,
                                              int accumulate, __nv_bfloat16) {
  FR_WGMMA_SS_MN_ASM("bf16");
}

// A no-swizzle shared-memory matrix descriptor: start address, LBO (bytes between core matrices along K) and
// SBO (bytes between core matrices along M / N), each in 16-byte units.
__device__ __forceinline__ uint64_t smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return static_cast<uint64_t>((addr >> 4) & 0x3FFF) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// Four 8x8 matrices of 16-bit values to shared memory, each transposed; lanes 8j..8j+7 give the row
// addresses of matrix j.
__device__ __forceinline__ void stmatrix_x4_trans(unsigned addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// mbarriers in shared memory (addresses from shared_address).
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised mbarriers visible to the other threads and to the copy engine.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// Arrives and announces `bytes` of TMA transfers that complete the phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// 16 bytes global -> shared through L2 only, asynchronously; cp_async_commit closes this thread's group of
// copies, cp_async_wait<N> waits until at most N of its groups are still in flight.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// The mbarrier's pending count drops by one when this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Generic-proxy writes to shared memory made visible to the async proxy (wgmma, TMA), and back.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A 4-d box of the tensor map `map` at coordinates (c0 .. c3) to shared memory at dst by TMA; out-of-range
// elements arrive as zeros; the transfer completes its bytes on mbarrier bar.
__device__ __forceinline__ void tma_load_4d(unsigned dst, const void* map, int c0, int c1, int c2, int c3,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// A 2-d box of `map` at (c0, c1) to shared memory at dst by TMA, completing its bytes on mbarrier bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Named barriers (ids 1-15) among `threads` threads.
// Brings the 128-byte line at p into L2 (no registers written).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register budgets of warp-specialized kernels: the calling warpgroup's limit raised / lowered to N.
template <int N>
__device__ __forceinline__ void raise_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void lower_registers() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace fresco::cuda
