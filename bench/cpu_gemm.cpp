// Benchmark of fresco::cpu::sgemm: the 11 GEMMs of one MLP 784-1024-512-256-10 training step (batch 128),
// their total, a large square product and the machine's FMA peak, one JSON line each (median of several
// repetitions). Invariants: operands are allocated and filled once, outside the timed region; the workspace
// is sized with gemm_workspace_bytes for the arena used. Usage: bench_cpu_gemm [--threads N] [--kernel
// avx512|avx2|generic]
// [--square N] [--min-ms T]; compare "gflops" with the "cpu_gemm_peak" line.
// GCC 12 warns inside its own AVX-512 intrinsics (the self-initialised _mm512_undefined_*, GCC PR 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gemm.h"

namespace {

using fresco::cpu::GemmArgs;
using fresco::cpu::GemmKernel;
using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

Buffer alloc_floats(size_t count) {
  const size_t bytes = std::max<size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
  return Buffer(static_cast<float*>(std::aligned_alloc(64, bytes)));
}

struct Shape {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// One GEMM with its own operands and workspace.
struct Problem {
  Shape s;
  Buffer a, b, c, ws;
  uint64_t ws_bytes = 0;
  GemmArgs args;
  double flops() const {
    return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  }
};

Problem make_problem(const Shape& s, int threads, std::mt19937& rng) {
  Problem p;
  p.s = s;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const size_t a_count = static_cast<size_t>(s.m * s.k), b_count = static_cast<size_t>(s.k * s.n);
  p.a = alloc_floats(a_count);
  p.b = alloc_floats(b_count);
  p.c = alloc_floats(static_cast<size_t>(s.m * s.n));
  for (size_t i = 0; i < a_count; ++i) p.a[i] = dist(rng);
  for (size_t i = 0; i < b_count; ++i) p.b[i] = dist(rng);
  std::memset(p.c.get(), 0, static_cast<size_t>(s.m * s.n) * sizeof(float));
  p.ws_bytes = fresco::cpu::gemm_workspace_bytes(s.m, s.n, s.k, threads);
  p.ws.reset(
      static_cast<float*>(std::aligned_alloc(64, std::max<uint64_t>(64, (p.ws_bytes + 63) / 64 * 64))));
  GemmArgs& g = p.args;
  g.trans_a = s.trans_a;
  g.trans_b = s.trans_b;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = p.a.get();
  g.lda = s.trans_a ? s.m : s.k;
  g.b = p.b.get();
  g.ldb = s.trans_b ? s.k : s.n;
  g.c = p.c.get();
  g.ldc = s.n;
  return p;
}

// Median over `samples` of the mean time of `inner` back-to-back calls of fn, in milliseconds.
template <class Fn>
double median_ms(Fn&& fn, double min_sample_ms, int samples) {
  fn();  // warm caches and threads
  int inner = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) fn();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ms >= min_sample_ms || inner >= (1 << 20)) break;
    inner *= 2;
  }
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) fn();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / inner);
  }
  std::nth_element(times.begin(), times.begin() + samples / 2, times.end());
  return times[samples / 2];
}

void run_sgemm(GemmKernel kernel, Problem& p) {
  fresco::cpu::sgemm_with_kernel(kernel, p.args, p.ws.get(), p.ws_bytes);
}

void print_shape(const char* kernel, const Shape& s, double ms, double flops, int threads) {
  std::printf(
      "{\"bench\":\"cpu_gemm\",\"kernel\":\"%s\",\"threads\":%d,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"trans_a\":"
      "%s,"
      "\"trans_b\":%s,\"ms\":%.4f,\"gflops\":%.1f}\n",
      kernel, threads, static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k),
      s.trans_a ? "true" : "false", s.trans_b ? "true" : "false", ms, flops / ms * 1e-6);
}

// Pure-FMA loop with 24 independent accumulators on one thread, in GFLOP/s.
__attribute__((target("avx512f,fma"), noinline)) float fma_loop_avx512(int64_t iters) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  float out[16];
  for (int i = 1; i < 24; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  _mm512_storeu_ps(out, acc[0]);
  return out[0];
}

__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  float out[8];
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  _mm256_storeu_ps(out, acc[0]);
  return out[0];
}

// FMA peak of `threads` threads for the kernel's vector width (0 for generic: not measured).
double peak_gflops(GemmKernel kernel, int threads) {
  if (kernel == GemmKernel::kGeneric) return 0.0;
  const bool wide = kernel == GemmKernel::kAvx512;
  const int64_t iters = 20'000'000;
  const double flops_per_iter = wide ? 24.0 * 32.0 : 12.0 * 16.0;
  volatile float sink = 0.0f;
  const double ms = median_ms(
      [&] {
        tbb::parallel_for(
            tbb::blocked_range<int>(0, threads, 1),
            [&](const tbb::blocked_range<int>& r) {
              for (int t = r.begin(); t != r.end(); ++t)
                sink = wide ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
            },
            tbb::static_partitioner());
      },
      1.0, 5);
  return threads * static_cast<double>(iters) * flops_per_iter / ms * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = tbb::this_task_arena::max_concurrency();
  GemmKernel kernel = GemmKernel::kGeneric;
  for (GemmKernel k : {GemmKernel::kAvx2, GemmKernel::kAvx512}) {
    if (fresco::cpu::gemm_kernel_supported(k)) kernel = k;
  }
  int64_t square = 2048;
  double min_ms = 20.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--threads" && value != nullptr) {
      threads = std::max(1, std::atoi(value));
      ++i;
    } else if (arg == "--kernel" && value != nullptr) {
      const std::string name = value;
      kernel = name == "avx512" ? GemmKernel::kAvx512
               : name == "avx2" ? GemmKernel::kAvx2
                                : GemmKernel::kGeneric;
      ++i;
    } else if (arg == "--square" && value != nullptr) {
      square = std::atoll(value);
      ++i;
    } else if (arg == "--min-ms" && value != nullptr) {
      min_ms = std::atof(value);
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--kernel avx512|avx2|generic] [--square N] [--min-ms T]\n",
                   argv[0]);
      return 64;
    }
  }
  if (!fresco::cpu::gemm_kernel_supported(kernel)) {
    std::fprintf(stderr, "kernel %s is not supported on this CPU\n", fresco::cpu::gemm_kernel_name(kernel));
    return 69;
  }
  const char* name = fresco::cpu::gemm_kernel_name(kernel);
  tbb::task_arena arena(threads);
  arena.execute([&] {
    std::printf("{\"bench\":\"cpu_gemm_peak\",\"kernel\":\"%s\",\"threads\":%d,\"gflops\":%.1f}\n", name,
                threads, peak_gflops(kernel, threads));
    // MLP 784-1024-512-256-10, batch 128: forward Y = X W^T, backward dX = dY W, dW = dY^T X.
    const std::vector<Shape> mlp = {
        {128, 1024, 784, false, true}, {128, 512, 1024, false, true},  {128, 256, 512, false, true},
        {128, 10, 256, false, true},   {128, 1024, 512, false, false}, {128, 512, 256, false, false},
        {128, 256, 10, false, false},  {1024, 784, 128, true, false},  {512, 1024, 128, true, false},
        {256, 512, 128, true, false},  {10, 256, 128, true, false}};
    std::mt19937 rng(1234);
    std::vector<Problem> problems;
    for (const Shape& s : mlp) problems.push_back(make_problem(s, threads, rng));
    double step_flops = 0.0;
    for (Problem& p : problems) {
      const double ms = median_ms([&] { run_sgemm(kernel, p); }, min_ms / 4, 15);
      print_shape(name, p.s, ms, p.flops(), threads);
      step_flops += p.flops();
    }
    const double step_ms = median_ms(
        [&] {
          for (Problem& p : problems) run_sgemm(kernel, p);
        },
        min_ms, 15);
    std::printf(
        "{\"bench\":\"cpu_gemm\",\"kernel\":\"%s\",\"threads\":%d,\"shape\":\"mlp_784_1024_512_256_10_"
        "batch128\","
        "\"gemms\":%zu,\"ms\":%.4f,\"gflops\":%.1f}\n",
        name, threads, problems.size(), step_ms, step_flops / step_ms * 1e-6);
    if (square > 0) {
      Problem p = make_problem({square, square, square, false, false}, threads, rng);
      const double ms = median_ms([&] { run_sgemm(kernel, p); }, min_ms, 5);
      print_shape(name, p.s, ms, p.flops(), threads);
    }
  });
  return 0;
}
