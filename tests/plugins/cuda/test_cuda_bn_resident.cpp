// The training batchnorm forward and backward as cooperative kernels (plugins/cuda/ops/bn_resident.h,
// FRESCO_CUDA_BN_RESIDENT and FRESCO_CUDA_BN_RESIDENT_BACKWARD): the same bits as the three kernels each
// replaces (y, the saved and the moved running statistics; dx, dgamma, dbeta), for batchnorm and
// batchnorm_add, with and without the fused relu (its mask recomputed in the backward), in place (y over x,
// dx over dy), with the other finalize width, in f32, bf16 and f16; on maps kept whole in shared memory
// (modes 1 and 2), with several chunks kept per block, a map kept only in part (mode 2; mode 1 leaves it to
// the three kernels), a last chunk of fewer rows, and a channel count the vector kernels do not take (the
// three kernels in every mode). The captured graph names the kernels that ran, so a silent fallback fails.
// Skipped without a GPU.
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
  std::vector<std::vector<uint8_t>> outputs;  // the node's outputs (and running statistics), as bytes
  std::string graphs;                         // the captured graphs' DOT text
};

// The DOT text of every graph captured under `prefix` (FRESCO_CUDA_GRAPH_DOT), the files removed.
std::string captured_graphs(const std::string& prefix) {
  std::string text;
  for (int i = 0;; ++i) {
    const std::string path = prefix + std::to_string(i) + ".dot";
    std::ifstream in(path);
    if (!in) break;
    std::stringstream s;
    s << in.rdbuf();
    text += s.str();
    std::remove(path.c_str());
  }
  return text;
}

// A map of shape x in dt and per-channel f32 vectors in one task, filled from one generator.
struct BnTask {
  SimpleTask t{"cuda"};
  Shape x;
  DType dt;
  std::mt19937 rng{7};
  std::uniform_real_distribution<float> d{-1.0f, 1.0f};
  std::vector<std::pair<TensorId, size_t>> reads;  // what run() returns, with its bytes
  BnTask(const Shape& shape, DType type) : x(shape), dt(type) {}
  TensorId map(const char* name) { return t.tensor(Region::T_TEMP, dt, x, name); }
  TensorId vec(const char* name) { return t.tensor(Region::T_TEMP, DType::F32, Shape{1, 1, 1, x.c}, name); }
  // offset + scale * U(-1, 1) per value (|U| with `positive`)
  void fill_map(TensorId id, float offset, float scale) {
    std::vector<float> v(static_cast<size_t>(x.numel()));
    for (float& e : v) e = offset + scale * d(rng);
    write_values(t, id, dt, v);
  }
  void fill_vec(TensorId id, float offset, float scale, bool positive = false) {
    std::vector<float> v(static_cast<size_t>(x.c));
    for (float& e : v) e = offset + scale * (positive ? std::fabs(d(rng)) : d(rng));
    t.write(id, v);
  }
  void read_map(TensorId id) { reads.emplace_back(id, static_cast<size_t>(x.numel()) * dtype_size(dt)); }
  void read_vec(TensorId id) { reads.emplace_back(id, static_cast<size_t>(x.c) * 4); }
  std::vector<std::vector<uint8_t>> run() {
    t.run(GraphId::DEEP_FWD_BWD);
    std::vector<std::vector<uint8_t>> out;
    for (const auto& [id, bytes] : reads) {
      std::vector<uint8_t> b(bytes);
      t.read(id, b.data(), b.size());
      out.push_back(std::move(b));
    }
    return out;
  }
};

// One case's node: batchnorm_add (forward only) or plain, the fused relu, in place, and the finalize width
// other than the default (FRESCO_CUDA_BN_FINALIZE_CHANNELS=16 forward, FRESCO_CUDA_GRAD_FINALIZE_CHANNELS=4
// backward).
struct BnVariant {
  bool residual = false;
  int relu = 1;
  bool inplace = false;
  bool other_finalize = false;
  std::string str() const {
    return std::string(residual ? "batchnorm_add" : "batchnorm") + " relu " + std::to_string(relu) +
           (inplace ? " in place" : "") + (other_finalize ? " other finalize width" : "");
  }
};
const std::vector<BnVariant> kVariants = {{false, 1, false, false},
                                          {false, 0, false, false},
                                          {true, 1, false, false},
                                          {false, 1, true, false},
                                          {false, 1, false, true}};

// One training batchnorm over a map of shape x in dt, captured and run once with
// FRESCO_CUDA_BN_RESIDENT=mode: y, the saved and the running statistics.
BnRun run_batchnorm(const Shape& x, DType dt, const BnVariant& v, const char* mode) {
  const std::string prefix = testing::TempDir() + "fresco_bn_resident_" + std::to_string(getpid()) + "_";
  const ScopedEnv env("FRESCO_CUDA_BN_RESIDENT", mode), dot("FRESCO_CUDA_GRAPH_DOT", prefix);
  const ScopedEnv width("FRESCO_CUDA_BN_FINALIZE_CHANNELS", v.other_finalize ? "16" : "4");
  const bool residual = v.residual;
  const int relu = v.relu;
  BnRun out;
  {
    BnTask b(x, dt);
    const TensorId xi = b.map("x"), y = v.inplace ? xi : b.map("y"), r = b.map("r");
    const TensorId gamma = b.vec("gamma"), beta = b.vec("beta"), mean = b.vec("mean"),
                   invstd = b.vec("invstd");
    const TensorId rm = b.vec("rm"), rv = b.vec("rv");
    b.t.lock_memory();
    GraphNode f = residual ? node(FR_OP_BATCHNORM_ADD, {xi, gamma, beta, r}, {y, mean, invstd})
                           : node(FR_OP_BATCHNORM, {xi, gamma, beta}, {y, mean, invstd});
    f.rout = {RangeRef::of(rm, DType::F32), RangeRef::of(rv, DType::F32)};
    f.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, relu});
    b.t.add(GraphId::DEEP_FWD_BWD, f);
    b.t.compile();
    b.fill_map(xi, 0.5f, 3.0f);  // a mean away from zero, as after a convolution
    b.fill_map(r, 0.0f, 1.0f);
    b.fill_vec(gamma, 0.5f, 1.0f, true);
    b.fill_vec(beta, 0.0f, 0.3f);
    b.fill_vec(rm, 0.0f, 0.1f);
    b.fill_vec(rv, 1.0f, 0.5f);
    b.read_map(y);
    for (TensorId id : {mean, invstd, rm, rv}) b.read_vec(id);
    out.outputs = b.run();
  }
  out.graphs = captured_graphs(prefix);  // the task is gone: every graph it captured is written
  return out;
}

// One training batchnorm backward with its own gradient sums (with the relu, the mask recomputed from x and
// beta), captured and run once with FRESCO_CUDA_BN_RESIDENT_BACKWARD=mode: dx, dgamma, dbeta.
BnRun run_batchnorm_backward(const Shape& x, DType dt, const BnVariant& v, const char* mode) {
  const std::string prefix = testing::TempDir() + "fresco_bn_resident_bwd_" + std::to_string(getpid()) + "_";
  const ScopedEnv env("FRESCO_CUDA_BN_RESIDENT_BACKWARD", mode), dot("FRESCO_CUDA_GRAPH_DOT", prefix);
  const ScopedEnv width("FRESCO_CUDA_GRAD_FINALIZE_CHANNELS", v.other_finalize ? "4" : "16");
  const ScopedEnv recompute("FRESCO_CUDA_BN_RECOMPUTE_MASK", "1");
  const int relu = v.relu;
  BnRun out;
  {
    BnTask b(x, dt);
    const TensorId dy = b.map("dy"), xi = b.map("x"), y = b.map("y"), dx = v.inplace ? dy : b.map("dx");
    const TensorId gamma = b.vec("gamma"), beta = b.vec("beta"), mean = b.vec("mean"),
                   invstd = b.vec("invstd");
    const TensorId dgamma = b.vec("dgamma"), dbeta = b.vec("dbeta");
    b.t.lock_memory();
    GraphNode g =
        relu ? node(FR_OP_BATCHNORM_BACKWARD, {dy, xi, gamma, mean, invstd, y, beta}, {dx, dgamma, dbeta})
             : node(FR_OP_BATCHNORM_BACKWARD, {dy, xi, gamma, mean, invstd}, {dx, dgamma, dbeta});
    g.with_params(FrBatchNormParams{1e-5f, 0.1f, 1, relu});
    b.t.add(GraphId::DEEP_FWD_BWD, g);
    b.t.compile();
    b.fill_map(dy, 0.0f, 1.0f);
    b.fill_map(xi, 0.5f, 3.0f);
    b.fill_vec(gamma, 0.5f, 1.0f, true);
    b.fill_vec(beta, 0.0f, 0.3f);
    b.fill_vec(mean, 0.5f, 0.2f);
    b.fill_vec(invstd, 0.3f, 0.5f, true);
    b.read_map(dx);
    b.read_vec(dgamma);
    b.read_vec(dbeta);
    out.outputs = b.run();
  }
  out.graphs = captured_graphs(prefix);
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

// Runs every variant (the backward's without the residual) of every map through `run` with modes 0, 1 and
// 2, expecting the same bytes and the resident kernel `kernel` in the graph where the map allows it.
template <class Run>
void expect_three_kernel_bits(const std::vector<MapCase>& maps, bool backward, const char* kernel,
                              const char* three_kernels_mark, const std::vector<const char*>& output,
                              Run run) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const MapCase& m : maps) {
      for (const BnVariant& v : kVariants) {
        if (backward && v.residual) continue;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + m.x.str() + " " + v.str());
        const BnRun three = run(m.x, dt, v, "0");
        EXPECT_TRUE(names(three, three_kernels_mark)) << "the three kernels are not in the graph";
        EXPECT_FALSE(names(three, kernel));
        const bool eligible = vector_channels(m.x.c, dt);
        for (const char* mode : {"1", "2"}) {
          const BnRun one = run(m.x, dt, v, mode);
          const bool expect = eligible && (m.whole || std::string(mode) == "2");
          EXPECT_EQ(names(one, kernel), expect) << "mode " << mode;
          ASSERT_EQ(one.outputs.size(), output.size());
          ASSERT_EQ(three.outputs.size(), output.size());
          for (size_t i = 0; i < one.outputs.size(); ++i)
            EXPECT_EQ(one.outputs[i], three.outputs[i]) << output[i] << " differs in mode " << mode;
        }
      }
    }
  }
}

TEST(CudaBnResident, GivesTheBitsOfTheThreeKernels) {
  FRESCO_REQUIRE_GPU();
  const std::vector<MapCase> maps = {
      {Shape{32, 4, 4, 512}, true},     // 16 chunks of 32 rows, 512 channels (ResNet's stage 4)
      {Shape{2, 4, 4, 512}, true},      // one chunk of 32 rows
      {Shape{37, 5, 6, 64}, true},      // 35 chunks, the last of 22 rows
      {Shape{64, 16, 16, 128}, true},   // 512 chunks of 8 KB in bf16 / f16
      {Shape{512, 8, 8, 64}, true},     // 512 chunks of 8 KB in bf16: two kept per block
      {Shape{256, 32, 32, 64}, false},  // 512 chunks of 512 rows: 32 MiB in bf16, kept in part
      {Shape{8, 5, 5, 48}, true},       // 6 (f32: 12) vectors a row: not a divisor of 256
  };
  expect_three_kernel_bits(maps, false, "bn_resident_kernel", "bn_apply",
                           {"y", "save_mean", "save_invstd", "running_mean", "running_var"}, run_batchnorm);
}

TEST(CudaBnResident, BackwardGivesTheBitsOfTheThreeKernels) {
  FRESCO_REQUIRE_GPU();
  const std::vector<MapCase> maps = {
      {Shape{16, 4, 4, 256}, true},    // 8 chunks of 32 rows: dy and x kept, 32 KB a chunk in bf16
      {Shape{2, 4, 4, 256}, true},     // one chunk of 32 rows (64 KB in f32)
      {Shape{37, 5, 6, 64}, true},     // 35 chunks, the last of 22 rows
      {Shape{512, 8, 8, 64}, true},    // 512 chunks of 16 KB (dy and x) in bf16: two kept per block
      {Shape{512, 8, 8, 256}, false},  // 512 chunks of 64 KB (dy and x) in bf16, 128 KB in f32: kept in part
      {Shape{8, 5, 5, 48}, true},      // not a vector channel count
  };
  expect_three_kernel_bits(maps, true, "bn_resident_backward_kernel", "bn_dx", {"dx", "dgamma", "dbeta"},
                           run_batchnorm_backward);
}
