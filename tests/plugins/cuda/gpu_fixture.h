// Shared helpers of the CUDA backend tests: GPU detection (tests skip, never fail, without one) and a runner
// that executes one graph node through SimpleTask on a given device, so the same node can be compared on CPU
// and CUDA.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fresco/core/plugin_loader.h"
#include "fresco/core/runtime.h"
#include "fresco/core/task.h"
#include "fresco/ops.h"
#include "graph_nodes.h"
#include "support/scoped_env.h"

namespace fresco::gpu_test {

inline bool have_gpu() {
  auto& reg = PluginRegistry::instance();
  reg.load_default({FRESCO_LIB_DIR});
  const FrDeviceApi* cuda = reg.device("cuda");
  return cuda && cuda->device_count && cuda->device_count() > 0;
}

#define FRESCO_REQUIRE_GPU()                                       \
  if (!::fresco::gpu_test::have_gpu()) {                           \
    GTEST_SKIP() << "no CUDA device (or no CUDA plugin): skipped"; \
  }

// SCALARS: an FrStepScalars at step 3 with 3 updates; SCALARS_AHEAD: at step 5 with 3 updates (two steps
// skipped by loss scaling), so a kernel reading one counter for the other is seen; SCALARS_SKIP: SCALARS with
// skip_step set (a step loss scaling skips); SCALARS_SCALED: SCALARS with a loss scale of 1024. RANDOM and
// the other float fills write f32 only; RANDOM_INF: RANDOM with +inf at the middle element.
enum class Fill {
  RANDOM,
  ZERO,
  LABELS,
  BYTES,
  SCALARS,
  SCALARS_AHEAD,
  SCALARS_SKIP,
  SCALARS_SCALED,
  RANDOM_INF,
  POSITIVE,
  RELU /* half zeros, as after a relu */
};

struct TensorSpec {
  DType dtype;
  Shape shape;
  Fill fill;
  int labels_below = 10;  // for LABELS
};

struct OpCase {
  std::vector<TensorSpec> tensors;  // tensor i gets id i
  GraphNode node;
  std::vector<TensorId> outputs;  // compared after the run
  std::vector<GraphNode> before;  // run first (e.g. the forward whose output a backward reads)
  int runs = 1;                   // graph replays before the outputs are read (for idempotent nodes)
};

inline std::vector<uint8_t> fill_bytes(const TensorSpec& t, std::mt19937& rng) {
  const size_t n = static_cast<size_t>(t.shape.numel());
  std::vector<uint8_t> bytes(n * dtype_size(t.dtype));
  if (t.fill == Fill::RANDOM || t.fill == Fill::RANDOM_INF || t.fill == Fill::POSITIVE ||
      t.fill == Fill::RELU) {
    std::uniform_real_distribution<float> d(t.fill == Fill::POSITIVE ? 0.01f : -1.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      float v = t.fill == Fill::RELU ? std::max(d(rng), 0.0f) : d(rng);
      if (t.fill == Fill::RANDOM_INF && i == n / 2) v = INFINITY;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else if (t.fill == Fill::LABELS) {
    std::uniform_int_distribution<int32_t> d(0, t.labels_below - 1);
    for (size_t i = 0; i < n; ++i) {
      const int32_t v = d(rng);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  } else if (t.fill == Fill::BYTES) {
    std::uniform_int_distribution<int> d(0, 255);
    for (auto& b : bytes) b = static_cast<uint8_t>(d(rng));
  } else if (t.fill == Fill::SCALARS || t.fill == Fill::SCALARS_AHEAD || t.fill == Fill::SCALARS_SKIP ||
             t.fill == Fill::SCALARS_SCALED) {
    FrStepScalars s{};
    s.lr = 0.01f;
    s.loss_scale = t.fill == Fill::SCALARS_SCALED ? 1024.0f : 1.0f;
    s.step = t.fill == Fill::SCALARS || t.fill == Fill::SCALARS_SCALED ? 3 : 5;
    s.updates = 3;
    s.skip_step = t.fill == Fill::SCALARS_SKIP ? 1 : 0;
    s.seed_lo = 1234;
    s.seed_hi = 5;
    std::memcpy(bytes.data(), &s, std::min(bytes.size(), sizeof s));
  }
  return bytes;
}

// Sets an environment variable for one scope and restores what was there (or its absence) on every exit;
// the CUDA context reads its tuning variables when a task creates it.
// The CUDA plugin's tuning cache (plugins/cuda/tuning) is off in the tests unless the environment or a test
// names a file: results must not depend on choices an earlier run or another build left in ~/.cache.
inline const bool kTuningCacheOffInTests = [] {
  setenv("FRESCO_CUDA_TUNING_CACHE", "off", 0);  // 0: an explicit setting stays
  return true;
}();

using fresco::test::ScopedEnv;  // (support/scoped_env.h)

// A temporary file's path (under the test's temp dir, with the process id), removed when this goes.
struct TempPath {
  std::string path;
  explicit TempPath(const std::string& name)
      : path(testing::TempDir() + name + std::to_string(getpid()) + ".tsv") {
    std::remove(path.c_str());
  }
  ~TempPath() { std::remove(path.c_str()); }
};

// A compute node over tensor ids, and a range node over ranges.
using test::node;
using test::range_node;

// Runs the case's node on `device`; returns the bytes of every output tensor.
inline std::vector<std::vector<uint8_t>> run_case(const std::string& device, const OpCase& c, uint32_t seed) {
  SimpleTask t(device);
  for (size_t i = 0; i < c.tensors.size(); ++i)
    t.tensor(Region::T_TEMP, c.tensors[i].dtype, c.tensors[i].shape, "t" + std::to_string(i));
  t.lock_memory();
  for (const GraphNode& b : c.before) t.add(GraphId::DEEP_FWD_BWD, b);
  t.add(GraphId::DEEP_FWD_BWD, c.node);
  t.compile();
  std::mt19937 rng(seed);
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const auto bytes = fill_bytes(c.tensors[i], rng);
    t.write(static_cast<TensorId>(i), bytes.data(), bytes.size());
  }
  for (int r = 0; r < c.runs; ++r) t.run(GraphId::DEEP_FWD_BWD);
  std::vector<std::vector<uint8_t>> out;
  for (TensorId id : c.outputs) {
    const TensorSpec& s = c.tensors[static_cast<size_t>(id)];
    std::vector<uint8_t> bytes(static_cast<size_t>(s.shape.numel()) * dtype_size(s.dtype));
    t.read(id, bytes.data(), bytes.size());
    out.push_back(std::move(bytes));
  }
  return out;
}

// max |a-b| / max |b| over float arrays.
inline double rel_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const size_t n = std::min(a.size(), b.size()) / 4;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    float x, y;
    std::memcpy(&x, a.data() + 4 * i, 4);
    std::memcpy(&y, b.data() + 4 * i, 4);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    num = std::max(num, std::fabs(static_cast<double>(x) - y));
    den = std::max(den, std::fabs(static_cast<double>(y)));
  }
  return num / std::max(den, 1e-30);
}

}  // namespace fresco::gpu_test
