// What the convolution probes (bench/conv3x3_probe.cu, bench/conv128_probe.cu) share: a failed CUDA or cuDNN
// call ends the probe with its location and message (CK, DK), and the command line --batch N, --dtype
// fp16|bf16, --reps N, after which main runs the probe's run<T>(batch, reps, dtype name, cuDNN type).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace fresco::bench {

inline void check(bool ok, const char* file, int line, const char* expr, const char* message) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d %s: %s\n", file, line, expr, message);
  std::exit(1);
}

// v rounded to the nearest T (__half, __nv_bfloat16).
template <class T>
T from_float(float v) {
  return static_cast<T>(v);  // round to nearest even in both 16-bit types
}

// n values uniform in [-scale, scale), rounded to T: a probe's inputs, the same from run to run for one rng.
template <class T>
std::vector<T> random_values(int64_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& e : v) e = from_float<T>(scale * d(rng));
  return v;
}

// The best of three timings of `reps` calls of fn back to back, in microseconds a call (CUDA events on the
// default stream). Defined after CK below.
class BestTimer {
 public:
  BestTimer();
  ~BestTimer();
  template <class F>
  float us(F fn, int reps) const;

 private:
  cudaEvent_t e0_{}, e1_{};
};

// The probe's arguments; parse() prints the usage and returns false on anything else.
struct ProbeArgs {
  int batch = 512, reps = 20;
  std::string dtype = "fp16";
  bool parse(int argc, char** argv, const char* name) {
    for (int i = 1; i < argc; i += 2) {
      const std::string a = argv[i];
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: %s needs a value\n", name, a.c_str());
        return false;
      }
      if (a == "--batch") {
        batch = std::atoi(argv[i + 1]);
      } else if (a == "--reps") {
        reps = std::atoi(argv[i + 1]);
      } else if (a == "--dtype") {
        dtype = argv[i + 1];
      } else {
        std::fprintf(stderr, "usage: %s [--batch 512] [--dtype fp16|bf16] [--reps 20]\n", name);
        return false;
      }
    }
    if (batch < 1 || reps < 1 || (dtype != "fp16" && dtype != "bf16")) {
      std::fprintf(stderr, "%s: --batch and --reps must be positive, --dtype fp16 or bf16\n", name);
      return false;
    }
    return true;
  }
};

// cuDNN's legacy API on a 3x3, stride 1, pad 1 NHWC convolution (tensor cores, fp32 accumulation): the
// descriptors, the fastest forward algorithm Find reports and its workspace. The probes' yardstick.
struct CudnnConv3x3 {
  cudnnHandle_t dnn{};
  cudnnTensorDescriptor_t xd{}, yd{};
  cudnnFilterDescriptor_t wd{};
  cudnnConvolutionDescriptor_t cd{};
  cudnnConvolutionFwdAlgoPerf_t perf[8]{};
  void* ws = nullptr;
  size_t ws_bytes = 0;
  CudnnConv3x3(cudnnDataType_t type, int batch, int c, int k, int h, int w);
  // y = conv(x, w) with the fastest algorithm
  void forward(const void* x, const void* w, void* y) const;
};

// main of a probe whose run<T>(batch, reps, dtype name, cuDNN type) returns the exit status.
template <class Run>
int probe_main(int argc, char** argv, const char* name, Run run) {
  ProbeArgs a;
  if (!a.parse(argc, argv, name)) return 64;
  return a.dtype == "fp16" ? run(__half{}, a.batch, a.reps, "fp16", CUDNN_DATA_HALF)
                           : run(__nv_bfloat16{}, a.batch, a.reps, "bf16", CUDNN_DATA_BFLOAT16);
}

}  // namespace fresco::bench

#define CK(x)                                                                                \
  do {                                                                                       \
    const cudaError_t e_ = (x);                                                              \
    fresco::bench::check(e_ == cudaSuccess, __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
  } while (0)
#define DK(x)                                                                                          \
  do {                                                                                                 \
    const cudnnStatus_t s_ = (x);                                                                      \
    fresco::bench::check(s_ == CUDNN_STATUS_SUCCESS, __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
  } while (0)

inline fresco::bench::CudnnConv3x3::CudnnConv3x3(cudnnDataType_t type, int batch, int c, int k, int h,
                                                 int w) {
  DK(cudnnCreate(&dnn));
  DK(cudnnCreateTensorDescriptor(&xd));
  DK(cudnnCreateTensorDescriptor(&yd));
  DK(cudnnCreateFilterDescriptor(&wd));
  DK(cudnnCreateConvolutionDescriptor(&cd));
  DK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, type, batch, c, h, w));
  DK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, type, batch, k, h, w));
  DK(cudnnSetFilter4dDescriptor(wd, type, CUDNN_TENSOR_NHWC, k, c, 3, 3));
  DK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DK(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  int got = 0;
  DK(cudnnFindConvolutionForwardAlgorithm(dnn, xd, wd, cd, yd, 8, &got, perf));
  ws_bytes = perf[0].memory;
  if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
}

inline void fresco::bench::CudnnConv3x3::forward(const void* x, const void* w, void* y) const {
  const float one = 1.0f, zero = 0.0f;
  DK(cudnnConvolutionForward(dnn, &one, xd, x, wd, w, cd, perf[0].algo, ws, ws_bytes, &zero, yd, y));
}

inline fresco::bench::BestTimer::BestTimer() {
  CK(cudaEventCreate(&e0_));
  CK(cudaEventCreate(&e1_));
}
inline fresco::bench::BestTimer::~BestTimer() {
  cudaEventDestroy(e0_);
  cudaEventDestroy(e1_);
}
template <class F>
float fresco::bench::BestTimer::us(F fn, int reps) const {
  float best = 1e30f;
  for (int r = 0; r < 3; ++r) {
    CK(cudaEventRecord(e0_));
    for (int i = 0; i < reps; ++i) fn();
    CK(cudaEventRecord(e1_));
    CK(cudaEventSynchronize(e1_));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0_, e1_));
    best = best < ms * 1000.0f / reps ? best : ms * 1000.0f / reps;
  }
  return best;
}
