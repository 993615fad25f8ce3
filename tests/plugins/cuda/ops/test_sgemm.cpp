// plugins/cuda/ops/sgemm.cu run directly: every tile shape and split count, each of the four layouts, edge
// sizes (1, not a multiple of any tile, k not a multiple of the 8-wide step, empty trailing splits), bias and
// relu, against a double-precision product on the host. Outputs are poisoned with NaN before each run, so an
// element left unwritten fails; a second run must give the same bits. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "fresco/plugin.hpp"
#include "ops/sgemm.h"
#include "plugins/cuda/cuda_device_test.h"

namespace fresco::cuda {
namespace {

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (bytes) {
      EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    }
  }
  ~DeviceBuffer() { cudaFree(p); }
  float* f() const { return static_cast<float*>(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Host reference of sgemm.h's definition: C[i,j] = sum_l op(A)[i,l] op(B)[l,j] (+ bias[j]) (relu), with
// sum |terms| for the tolerance.
void reference(const SgemmProblem& p, const std::vector<float>& a, const std::vector<float>& b,
               const std::vector<float>& bias, std::vector<double>& c, std::vector<double>& mag) {
  c.assign(static_cast<size_t>(p.m * p.n), 0.0);
  mag.assign(c.size(), 0.0);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double s = 0.0, g = 0.0;
      for (int64_t l = 0; l < p.k; ++l) {
        const double x = p.trans_a ? a[l * p.m + i] : a[i * p.k + l];
        const double y = p.trans_b ? b[j * p.k + l] : b[l * p.n + j];
        s += x * y;
        g += std::fabs(x * y);
      }
      if (p.bias) s += bias[j], g += std::fabs(bias[j]);
      if (p.relu) s = s > 0.0 ? s : 0.0;
      c[i * p.n + j] = s;
      mag[i * p.n + j] = g;
    }
}

// Runs every configuration in `configs` on one problem; failures name the configuration.
void expect_configs_match(const SgemmProblem& p, const std::vector<SgemmConfig>& configs, uint32_t seed) {
  ASSERT_TRUE(sgemm_fits(p));
  std::mt19937 rng(seed);
  const auto a = random_values(static_cast<size_t>(p.m * p.k), rng);
  const auto b = random_values(static_cast<size_t>(p.k * p.n), rng);
  const auto bias = random_values(static_cast<size_t>(p.n), rng);
  std::vector<double> ref, mag;
  reference(p, a, b, bias, ref, mag);
  DeviceBuffer da(a.size() * 4), db(b.size() * 4), dbias(bias.size() * 4), dc(ref.size() * 4);
  CHECK_CUDA(cudaMemcpy(da.p, a.data(), a.size() * 4, cudaMemcpyHostToDevice), "copy a");
  CHECK_CUDA(cudaMemcpy(db.p, b.data(), b.size() * 4, cudaMemcpyHostToDevice), "copy b");
  CHECK_CUDA(cudaMemcpy(dbias.p, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice), "copy bias");
  const std::string shape = std::string(p.trans_a ? "T" : "N") + (p.trans_b ? "T" : "N") + " " +
                            std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) +
                            (p.bias ? " bias" : "") + (p.relu ? " relu" : "");
  for (const SgemmConfig cfg : configs) {
    const std::string what = shape + " " + sgemm_name(cfg);
    DeviceBuffer ws(sgemm_workspace(p, cfg));
    std::vector<float> got(ref.size()), again(ref.size());
    for (auto* out : {&got, &again}) {
      CHECK_CUDA(cudaMemset(dc.p, 0xff, ref.size() * 4), "poison");  // all-ones bits: NaN
      sgemm_run(p, cfg, da.f(), db.f(), dc.f(), dbias.f(), ws.p, sgemm_workspace(p, cfg), nullptr);
      CHECK_CUDA(cudaDeviceSynchronize(), what);
      CHECK_CUDA(cudaMemcpy(out->data(), dc.p, ref.size() * 4, cudaMemcpyDeviceToHost), "copy c");
    }
    size_t bad = 0;
    for (size_t i = 0; i < ref.size() && bad < 5; ++i)
      if (!(std::fabs(got[i] - ref[i]) <= 1e-5 * mag[i] + 1e-30)) {
        ADD_FAILURE() << what << ": element " << i << " (row " << i / p.n << ", col " << i % p.n << ") is "
                      << got[i] << ", expected " << ref[i];
        ++bad;
      }
    EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * 4), 0) << what << ": two runs differ";
  }
}

std::vector<SgemmConfig> every_config(int max_splits) {
  std::vector<SgemmConfig> all;
  for (int t = 0; t < sgemm_tile_count(); ++t)
    for (int s = 1; s <= max_splits; ++s) all.push_back({t, s});
  return all;
}

TEST(CudaSgemm, EveryConfigurationAndLayoutOnEdgeShapes) {
  REQUIRE_GPU();
  struct S {
    int64_t m, n, k;
  };
  // 1 row; sizes below, at and past a tile; k not a multiple of the 16-wide step; more splits than steps.
  const S shapes[] = {{4, 4, 4}, {1, 8, 12}, {68, 20, 52}, {132, 200, 36}, {257, 132, 100}};
  uint32_t seed = 1;
  for (const S s : shapes)
    for (int layout = 0; layout < 4; ++layout) {
      SgemmProblem p{(layout & 1) != 0, (layout & 2) != 0, s.m, s.n, s.k, false, false};
      if (p.trans_a && p.m % 4) continue;  // does not fit (tested below)
      expect_configs_match(p, every_config(3), seed++);
    }
}

TEST(CudaSgemm, BiasAndReluInBothEpilogues) {
  REQUIRE_GPU();
  // Without split-K the kernel adds the bias and applies relu; with it the reduction pass does.
  for (const bool relu : {false, true})
    expect_configs_match(SgemmProblem{false, true, 130, 72, 64, true, relu}, every_config(4), relu ? 7u : 8u);
  expect_configs_match(SgemmProblem{false, false, 33, 16, 40, false, true}, every_config(2), 9u);
}

TEST(CudaSgemm, TheMlpProblemsWithTheirOfferedConfigurations) {
  REQUIRE_GPU();
  int sms = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sm count");
  // fc forward (x w^T + b, relu), input gradient (dy w), weight gradient (dy^T x) of the 784-1024-512-256
  // layers at batches 128 and 1024: the configurations matmul_plan.cu times for them.
  const SgemmProblem problems[] = {
      {false, true, 1024, 1024, 784, true, true},    {false, true, 128, 512, 1024, true, true},
      {false, false, 1024, 1024, 512, false, false}, {false, false, 128, 512, 256, false, false},
      {true, false, 1024, 784, 1024, false, false},  {true, false, 256, 512, 128, false, false}};
  uint32_t seed = 100;
  for (const SgemmProblem& p : problems) {
    const auto configs = sgemm_configs(p, sms, 32ull << 20);
    ASSERT_FALSE(configs.empty());
    for (const SgemmConfig c : configs) EXPECT_LE(sgemm_workspace(p, c), 32ull << 20) << sgemm_name(c);
    expect_configs_match(p, configs, seed++);
  }
}

TEST(CudaSgemm, RefusesWhatItCannotRun) {
  // Shape rules need no GPU.
  EXPECT_FALSE(sgemm_fits({false, true, 8, 6, 8, false, false}));   // n not a multiple of 4
  EXPECT_FALSE(sgemm_fits({false, true, 8, 8, 6, false, false}));   // k not a multiple of 4
  EXPECT_FALSE(sgemm_fits({true, false, 6, 8, 8, false, false}));   // transposed A with m not a multiple of 4
  EXPECT_TRUE(sgemm_fits({false, false, 6, 8, 8, false, false}));   // m is free otherwise
  EXPECT_FALSE(sgemm_fits({false, false, 0, 8, 8, false, false}));  // empty
  EXPECT_TRUE(sgemm_configs({false, true, 8, 6, 8, false, false}, 132, 1 << 20).empty());
  EXPECT_EQ(sgemm_workspace({false, false, 10, 8, 64, false, false}, {0, 3}), 3u * 10 * 8 * 4);
  REQUIRE_GPU();
  DeviceBuffer buf(4096);
  const SgemmProblem p{false, false, 4, 4, 4, false, false};
  const float* base = buf.f();
  auto run = [&](const float* a, SgemmConfig c, uint64_t ws) {
    sgemm_run(p, c, a, base, buf.f() + 512, nullptr, ws ? buf.p : nullptr, ws, nullptr);
  };
  EXPECT_THROW(run(base + 1, {0, 1}, 0), sdk::KernelError);  // misaligned operand
  EXPECT_THROW(run(base, {99, 1}, 0), sdk::KernelError);     // no such tile
  EXPECT_THROW(run(base, {0, 2}, 0), sdk::KernelError);      // split-K without its workspace
  EXPECT_NO_THROW(run(base, {0, 1}, 0));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace fresco::cuda
