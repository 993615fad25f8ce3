// Benchmark: fresco's own strict-fp32 GEMM (plugins/cuda/ops/sgemm.h) on the MLP 784-1024-512-256 problems
// (fc forward, input gradient, weight gradient at --batch), every configuration matmul_plan.cu would time.
// Each configuration runs --reps back-to-back calls captured in one CUDA graph, best of 5 replays; prints one
// JSON line per (problem, configuration) with us/call and TFLOP/s. cuBLASLt's times for the same problems are
// printed by the plugin's own search (FRESCO_CUBLAS_LOG=1 with FRESCO_CUDA_SGEMM=1 on any fresco run).
// Usage: bench_sgemm [--batch 1024] [--reps 20] [--problem all|fc0-forward|...] [--config
// all|128x64k4/s1|...] (one problem and configuration: for a profiler)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "bench_args.h"
#include "fresco/plugin.hpp"
#include "ops/sgemm.h"

namespace {
bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "bench_sgemm: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace fresco::cuda;
  const fresco::bench::Args args(argc, argv,
                                 {{"batch", "1024"}, {"reps", "20"}, {"problem", "all"}, {"config", "all"}});
  const std::string only_problem = args.str("problem"), only_config = args.str("config");
  const int64_t b = args.integer("batch");
  const int reps = static_cast<int>(args.integer("reps"));
  if (b < 1 || b > 4096 || reps < 1) {
    std::fprintf(stderr, "bench_sgemm: --batch must be 1..4096 and --reps at least 1\n");
    return 64;
  }
  int sms = 0;
  if (!ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "device")) return 69;
  struct Named {
    const char* what;
    SgemmProblem p;
  };
  const Named problems[] = {
      {"fc0-forward", {false, true, b, 1024, 784, true, true}},
      {"fc1-forward", {false, true, b, 512, 1024, true, true}},
      {"fc2-forward", {false, true, b, 256, 512, true, true}},
      {"fc2-input-grad", {false, false, b, 512, 256, false, false}},
      {"fc1-input-grad", {false, false, b, 1024, 512, false, false}},
      {"fc2-weight-grad", {true, false, 256, 512, b, false, false}},
      {"fc1-weight-grad", {true, false, 512, 1024, b, false, false}},
      {"fc0-weight-grad", {true, false, 1024, 784, b, false, false}},
  };
  float *a = nullptr, *bm = nullptr, *c = nullptr, *bias = nullptr;
  void* ws = nullptr;
  const size_t big = 1024 * 1024 * 4;  // elements: covers every operand at batch <= 4096
  const uint64_t ws_max = 32ull << 20;
  if (!ok(cudaMalloc(&a, big * 4), "alloc") || !ok(cudaMalloc(&bm, big * 4), "alloc") ||
      !ok(cudaMalloc(&c, big * 4), "alloc") || !ok(cudaMalloc(&bias, 4096 * 4), "alloc") ||
      !ok(cudaMalloc(&ws, ws_max), "alloc"))
    return 69;
  std::vector<float> host(big);
  for (size_t i = 0; i < big; ++i) host[i] = static_cast<float>((i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
  if (!ok(cudaMemcpy(a, host.data(), big * 4, cudaMemcpyHostToDevice), "copy") ||
      !ok(cudaMemcpy(bm, host.data(), big * 4, cudaMemcpyHostToDevice), "copy") ||
      !ok(cudaMemcpy(bias, host.data(), 4096 * 4, cudaMemcpyHostToDevice), "copy"))
    return 69;
  cudaStream_t s = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream") ||
      !ok(cudaEventCreate(&e0), "event") || !ok(cudaEventCreate(&e1), "event"))
    return 69;
  for (const Named& n : problems) {
    if (only_problem != "all" && only_problem != n.what) continue;
    const double gflop = 2.0 * n.p.m * n.p.n * n.p.k * 1e-9;
    for (const SgemmConfig cfg : sgemm_configs(n.p, sms, ws_max)) {
      if (only_config != "all" && only_config != sgemm_name(cfg)) continue;
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      try {
        if (!ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture")) return 70;
        for (int r = 0; r < reps; ++r) sgemm_run(n.p, cfg, a, bm, c, bias, ws, ws_max, s);
        if (!ok(cudaStreamEndCapture(s, &g), "capture") ||
            !ok(cudaGraphInstantiate(&exec, g, 0), "instantiate"))
          return 70;
      } catch (const fresco::sdk::KernelError& e) {
        std::fprintf(stderr, "bench_sgemm: %s: %s\n", sgemm_name(cfg).c_str(), e.message.c_str());
        return 70;
      }
      float best = 1e30f;
      for (int i = 0; i < 6; ++i) {
        float ms = 0.0f;
        if (!ok(cudaEventRecord(e0, s), "record") || !ok(cudaGraphLaunch(exec, s), "launch") ||
            !ok(cudaEventRecord(e1, s), "record") || !ok(cudaEventSynchronize(e1), "run") ||
            !ok(cudaEventElapsedTime(&ms, e0, e1), "time"))
          return 70;
        if (i > 0) best = std::min(best, ms);  // the first replay warms up
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
      const double us = best * 1000.0 / reps;
      std::printf(
          "{\"bench\": \"sgemm\", \"problem\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"config\": "
          "\"%s\", "
          "\"us\": %.2f, \"tflops\": %.1f}\n",
          n.what, static_cast<long long>(n.p.m), static_cast<long long>(n.p.n), static_cast<long long>(n.p.k),
          sgemm_name(cfg).c_str(), us, gflop / us * 1e3);
    }
  }
  std::fflush(stdout);
  return 0;
}
