// How much of a map a pass finds in L2 right after the kernel that wrote it, by the order it sweeps the map
// (a diagnostic for the element-wise passes of a training step: the batchnorm apply after a convolution,
// the batchnorm input gradient after an input gradient). A producer copies x into y with a grid-stride
// sweep from the start to the end (as a convolution's persistent blocks write their tiles in order), then a
// consumer, timed alone, reads y (and writes z) sweeping either the same way or from the end back; and a
// chunked reader (one block per 1/512 of the rows, as the statistics passes read) in either order of rows.
// Prints one JSON line per map size: microseconds per consumer (median of the repetitions).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

#define CHECK(e)                                                                         \
  do {                                                                                   \
    cudaError_t err_ = (e);                                                              \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

constexpr int kThreads = 256;

__global__ void copy_kernel(const int4* x, int4* y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x[i];
}

// The sweep consumers: each thread the same indices first + j * stride, j rising (reverse = 0) or falling.
__global__ void sweep_kernel(const int4* y, int4* z, int64_t n, int reverse, int* sink) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t count = first < n ? (n - 1 - first) / stride + 1 : 0;
  int64_t i = reverse ? first + (count - 1) * stride : first;
  const int64_t step = reverse ? -stride : stride;
  int acc = 0;
#pragma unroll 4
  for (int64_t j = 0; j < count; ++j, i += step) {
    const int4 v = y[i];
    if (z)
      z[i] = make_int4(v.x + 1, v.y, v.z, v.w);
    else
      acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;
}

// Chunked reader: block b reads rows [b * per, (b + 1) * per) of 256-thread-wide rows, in order or back.
__global__ void chunk_kernel(const int4* y, int64_t n, int64_t per, int reverse, int* sink) {
  const int64_t r0 = blockIdx.x * per;
  int acc = 0;
  for (int64_t j = 0; j < per; ++j) {
    const int64_t r = reverse ? r0 + per - 1 - j : r0 + j;
    const int64_t i = r * kThreads + threadIdx.x;
    if (i < n) {
      const int4 v = y[i];
      acc += v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  if (acc == 0x7fffffff) *sink = acc;
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const unsigned grid = static_cast<unsigned>(sms * 8);
  const double sizes_mb[] = {8.4, 16.8, 25.2, 33.5, 50.3, 67.1};
  const size_t max_bytes = static_cast<size_t>(67.2 * 1024 * 1024);
  int4 *x, *y, *z;
  int* sink;
  CHECK(cudaMalloc(&x, max_bytes));
  CHECK(cudaMalloc(&y, max_bytes));
  CHECK(cudaMalloc(&z, max_bytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(x, 1, max_bytes));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::printf("{\"bench\":\"l2_sweep_probe_device\",\"sms\":%d,\"l2_bytes\":%d}\n", sms, l2);
  for (double mb : sizes_mb) {
    const int64_t n = static_cast<int64_t>(mb * 1024 * 1024 / 16);
    const int64_t rows = (n + kThreads - 1) / kThreads, per = (rows + 511) / 512;
    // consumer c: 0 read fwd, 1 read back, 2 read+write fwd, 3 read+write back, 4 chunks fwd, 5 chunks back,
    // 6 read fwd after a producer that ran the other way (a cold map: y's start least recent)
    const char* names[] = {"read_same_way",   "read_back",   "apply_same_way", "apply_back",
                           "chunks_in_order", "chunks_back", "read_cold"};
    std::printf("{\"bench\":\"l2_sweep_probe\",\"map_mb\":%.1f", mb);
    for (int c = 0; c < 7; ++c) {
      std::vector<float> t;
      for (int rep = 0; rep < 25; ++rep) {
        copy_kernel<<<grid, kThreads>>>(x, y, n);
        if (c == 6) {  // flush y out of L2 with a sweep of z the size of L2 twice over
          copy_kernel<<<grid, kThreads>>>(x, z, std::min<int64_t>(2 * l2 / 16, max_bytes / 16));
        }
        CHECK(cudaEventRecord(a));
        if (c < 4 || c == 6)
          sweep_kernel<<<grid, kThreads>>>(y, (c == 2 || c == 3) ? z : nullptr, n, c == 1 || c == 3, sink);
        else
          chunk_kernel<<<512, kThreads>>>(y, n, per, c == 5, sink);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0.0f;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (rep >= 5) t.push_back(ms * 1000.0f);
      }
      std::sort(t.begin(), t.end());
      std::printf(",\"%s_us\":%.2f", names[c], t[t.size() / 2]);
    }
    std::printf("}\n");
  }
  CHECK(cudaGetLastError());
  return 0;
}
