// What the stage-2 convolution probes (bench/conv128_probe.cu, bench/conv128_rs_probe.cu) share: ResNet-18's
// 3x3, stride 1, pad 1, 128 -> 128 convolution on 16-wide NHWC maps; its direct fp32 reference kernel and the
// TMA tensor maps both read their operands through. Needs probe_common.h (check, CK) included first.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fresco::bench::conv128 {

constexpr int kC = 128, kW = 16, kTaps = 9, kKDim = kTaps * kC;  // in = out channels, row width, k = 1152

// y[n][p][q][k] = sum of x[n][p + r - 1][q + s - 1][c] w[k][r][s][c] in fp32, one output per thread.
template <class T>
__global__ void reference_kernel(const T* x, const T* w, float* y, int n, int h) {
  const int64_t total = static_cast<int64_t>(n) * h * kW * kC;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % kC), q = static_cast<int>((i / kC) % kW),
              p = static_cast<int>((i / (kC * kW)) % h);
    const int64_t img = i / (static_cast<int64_t>(kC) * kW * h);
    float s = 0.0f;
    for (int r = 0; r < 3; ++r) {
      const int yr = p + r - 1;
      if (yr < 0 || yr >= h) continue;
      for (int c3 = 0; c3 < 3; ++c3) {
        const int xc = q + c3 - 1;
        if (xc < 0 || xc >= kW) continue;
        const T* xp = x + ((img * h + yr) * kW + xc) * kC;
        const T* wp = w + (static_cast<int64_t>(k) * kTaps + r * 3 + c3) * kC;
        for (int c = 0; c < kC; ++c) s += static_cast<float>(xp[c]) * static_cast<float>(wp[c]);
      }
    }
    y[i] = s;
  }
}

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult q{};
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  check(f != nullptr && q == cudaDriverEntryPointSuccess, __FILE__, __LINE__, "cuTensorMapEncodeTiled",
        "the driver has no cuTensorMapEncodeTiled");
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
}

// A tensor map of a 16-bit array (rank dims, the innermost first, strides in bytes of dims 1..), read in
// boxes; what lies outside the array arrives as zeros.
template <int kRank>
CUtensorMap tiled_map(const void* p, bool f16, const cuuint64_t (&dims)[kRank], const cuuint64_t* strides,
                      const cuuint32_t (&box)[kRank]) {
  CUtensorMap m;
  cuuint32_t elem[kRank];
  for (auto& e : elem) e = 1;
  const CUresult r = encode_tiled()(
      &m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, kRank,
      const_cast<void*>(p), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  check(r == CUDA_SUCCESS, __FILE__, __LINE__, "cuTensorMapEncodeTiled", "failed");
  return m;
}

// x [n, h, 16, 128] read in windows of 8 channels x `cols` columns x `rows` rows x 1 image.
inline CUtensorMap window_map(const void* x, bool f16, int n, int h, unsigned cols, unsigned rows) {
  const cuuint64_t strides[3] = {kC * 2, kW * kC * 2, static_cast<cuuint64_t>(h) * kW * kC * 2};
  return tiled_map<4>(x, f16, {kC, kW, static_cast<cuuint64_t>(h), static_cast<cuuint64_t>(n)}, strides,
                      {8, cols, rows, 1});
}

}  // namespace fresco::bench::conv128
