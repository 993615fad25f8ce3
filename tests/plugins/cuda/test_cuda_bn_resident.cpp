// The training batchnorm forward as one cooperative kernel (plugins/cuda/ops/bn_resident.h,
// FRESCO_CUDA_BN_RESIDENT): the same bits as the moments pass, finalize and apply pass it replaces (y, the
// saved statistics, the moved running statistics), for batchnorm and batchnorm_add, with and without the
// fused relu, in f32, bf16 and f16; on maps kept whole in shared memory (modes 1 and 2), a map kept only in
// part (mode 2; mode 1 leaves it to the three kernels), a last chunk of fewer rows, and a channel count the
// vector kernels do not take (the three kernels in every mode). The captured graph names the kernels that
// ran, so a silent fallback fails. Skipped without a GPU.
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "plugins/cuda/low_precision_case.h"

using namespace fresco;
using namespace fresco::gpu_test;

namespace {

struct BnRun {
  std::vector<std::vector<uint8_t>> outputs;  // y, save_mean, save_invstd, running mean, running variance
  std::string graphs;                         // the captured graphs' DOT text
};

// One training batchnorm (batchnorm_add with `residual`) over a map of shape x in dt, captured and run once
// with FRESCO_CUDA_BN_RESIDENT=mode.
BnRun run_batchnorm(const Shape& x, DType dt, bool residual, int relu, const char* mode) {
  const std::string prefix = testing::TempDir() + "fresco_bn_resident_" + std::to_string(getpid()) + "_";
  const ScopedEnv env("FRESCO_CUDA_BN_RESIDENT", mode), dot("FRESCO_CUDA_GRAPH_DOT", prefix);
  const int64_t c = x.c;
  const Shape v{1, 1, 1, c};
  const size_t n = static_cast<size_t>(x.numel());
  BnRun out;
  {
    SimpleTask t("cuda");
    auto map = [&](const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); };
    auto vec = [&](const char* name) { return t.tensor(Region::T_TEMP, DType::F32, v, name); };
    const TensorId xi = map("x"), y = map("y"), r = map("r");
    const TensorId gamma = vec("gamma"), beta = vec("beta"), mean = vec("mean"), invstd = vec("invstd");
    const TensorId rm = vec("rm"), rv = vec("rv");
    t.lock_memory();
    GraphNode f = residual ? node(FR_OP_BATCHNORM_ADD, {xi, gamma, beta, r}, {y, mean, invstd})
                           : node(FR_OP_BATCHNORM, {xi, gamma, beta}, {y, mean, invstd});
    f.rout = {RangeRef::of(rm, DType::F32), RangeRef::of(rv, DType::F32)};
    f.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, relu});
    t.add(GraphId::DEEP_FWD_BWD, f);
    t.compile();
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> xs(n), rs(n);
    for (float& e : xs) e = 0.5f + 3.0f * d(rng);  // a mean away from zero, as after a convolution
    for (float& e : rs) e = d(rng);
    write_values(t, xi, dt, xs);
    write_values(t, r, dt, rs);
    std::vector<float> g(static_cast<size_t>(c)), b(g.size()), rmv(g.size()), rvv(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = 0.5f + std::fabs(d(rng)), b[i] = 0.3f * d(rng), rmv[i] = 0.1f * d(rng),
      rvv[i] = 1.0f + d(rng) / 2;
    t.write(gamma, g);
    t.write(beta, b);
    t.write(rm, rmv);
    t.write(rv, rvv);
    t.run(GraphId::DEEP_FWD_BWD);
    std::vector<uint8_t> ys(n * dtype_size(dt));
    t.read(y, ys.data(), ys.size());
    out.outputs.push_back(std::move(ys));
    for (TensorId id : {mean, invstd, rm, rv}) {
      const auto f32 = t.read<float>(id, static_cast<size_t>(c));
      std::vector<uint8_t> bytes(f32.size() * 4);
      std::memcpy(bytes.data(), f32.data(), bytes.size());
      out.outputs.push_back(std::move(bytes));
    }
  }
  for (int i = 0;; ++i) {  // the task is gone: every graph it captured is written
    const std::string path = prefix + std::to_string(i) + ".dot";
    std::ifstream in(path);
    if (!in) break;
    std::stringstream s;
    s << in.rdbuf();
    out.graphs += s.str();
    std::remove(path.c_str());
  }
  return out;
}

bool names(const BnRun& r, const char* kernel) {
  return r.graphs.find(kernel) != std::string::npos;
}

struct MapCase {
  Shape x;
  bool whole;  // kept whole in shared memory on an H100 / H200 (mode 1 takes it)
};

// Whether the vector kernels take C channels of dt: 16-byte vectors of a row that divide 256 threads.
bool vector_channels(int64_t c, DType dt) {
  const int64_t v = 16 / static_cast<int64_t>(dtype_size(dt));
  return c % v == 0 && 256 % (c / v) == 0;
}

}  // namespace

TEST(CudaBnResident, GivesTheBitsOfTheThreeKernels) {
  FRESCO_REQUIRE_GPU();
  const std::vector<MapCase> maps = {
      {Shape{32, 4, 4, 512}, true},     // 8 chunks of 64 rows, 512 channels (ResNet's stage 4)
      {Shape{37, 5, 6, 64}, true},      // 18 chunks, the last of 22 rows
      {Shape{64, 16, 16, 128}, true},   // 256 chunks of 16 KB in bf16 / f16
      {Shape{256, 32, 32, 64}, false},  // 512 chunks of 512 rows: 32 MiB in bf16, kept in part
      {Shape{8, 5, 5, 48}, true},       // 6 (f32: 12) vectors a row: not a divisor of 256
  };
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const MapCase& m : maps) {
      for (const auto& [residual, relu] : {std::pair{false, 1}, std::pair{false, 0}, std::pair{true, 1}}) {
        const std::string what = std::string(dtype_name(dt)) + " " + m.x.str() +
                                 (residual ? " batchnorm_add" : " batchnorm") + " relu " +
                                 std::to_string(relu);
        SCOPED_TRACE(what);
        const BnRun three = run_batchnorm(m.x, dt, residual, relu, "0");
        EXPECT_TRUE(names(three, "bn_apply")) << "the three kernels' apply pass is not in the graph";
        EXPECT_FALSE(names(three, "bn_resident_kernel"));
        const bool eligible = vector_channels(m.x.c, dt);
        for (const char* mode : {"1", "2"}) {
          const BnRun one = run_batchnorm(m.x, dt, residual, relu, mode);
          const bool expect = eligible && (m.whole || std::string(mode) == "2");
          EXPECT_EQ(names(one, "bn_resident_kernel"), expect) << "FRESCO_CUDA_BN_RESIDENT=" << mode;
          ASSERT_EQ(one.outputs.size(), three.outputs.size());
          const char* output[] = {"y", "save_mean", "save_invstd", "running_mean", "running_var"};
          for (size_t i = 0; i < one.outputs.size(); ++i)
            EXPECT_EQ(one.outputs[i], three.outputs[i])
                << output[i] << " differs, FRESCO_CUDA_BN_RESIDENT=" << mode;
        }
      }
    }
  }
}
