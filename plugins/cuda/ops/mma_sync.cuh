// Warp-level tensor-core building blocks shared by fresco's own CUDA kernels (ops/narrow_conv.cu) and the
// stage-1 convolution probe (bench/conv3x3_probe.cu): the m16n8k16 product with f32 accumulators, the
// ldmatrix loads that feed it and the paired rounding of its results. Self-contained (CUDA headers only), so
// a standalone program can include it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fresco::cuda {

// d += a (16x16, row-major) * b (16x8, col-major); the last argument picks the 16-bit input type.
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                    __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// (a, b) rounded to T in one instruction: the packed bits, and the rounded values as floats in ra, rb.
__device__ __forceinline__ uint32_t round2(float a, float b, float& ra, float& rb, __half) {
  const __half2 h = __floats2half2_rn(a, b);
  ra = __low2float(h), rb = __high2float(h);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t round2(float a, float b, float& ra, float& rb, __nv_bfloat16) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  ra = __low2float(h), rb = __high2float(h);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// a and b (float or double) each added over the lanes whose index differs from this lane's in the bits kFrom
// .. kTo / 2 (a fixed shuffle tree): kFrom = 1, kTo = 4 sums the four lanes of an mma fragment row (tq),
// kFrom = 4, kTo = 32 the eight rows (gid) holding the same columns.
template <int kFrom, int kTo, class A>
__device__ __forceinline__ void add_over_lanes(A& a, A& b) {
#pragma unroll
  for (int off = kFrom; off < kTo; off <<= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, off);
    b += __shfl_xor_sync(0xffffffffu, b, off);
  }
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 8x8 matrices of 16-bit values from shared memory (ldmatrix): lanes 8j..8j+7 give the row addresses of
// matrix j; .trans delivers each transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4(r, shared_address(p));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4_trans(r, shared_address(p));
}

}  // namespace fresco::cuda
