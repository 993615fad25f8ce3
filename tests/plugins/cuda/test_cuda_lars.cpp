// LARS with a one-cycle schedule (its cycled momentum from the per-step table) trained end to end on CUDA
// against the same job on the CPU: one lars_update node per weight tensor and the 1-D parameters' SGD,
// captured in the step's graph with the momentum table, give the CPU's losses and weights within fp32
// rounding (the trust ratios' norms are added in another order). The CPU twin: tests/e2e/test_lars_cpu.cpp
// and test_one_cycle_cpu.cpp. Skipped without a GPU.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

namespace {
struct LarsRun {
  TrainingResult result;
  std::map<std::string, std::vector<float>> state;
};

LarsRun train(const std::string& device) {
  DeepLearningTask t;
  t.model(seq({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn(), relu(), gap(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(LARS(0.9f, 2e-2f).base_lr(0.5f).with_weight_decay(1e-2f))
      .scheduler(OneCycleLR())
      .epochs(3)
      .shuffle(false)
      .device(device);
  t.compile();
  LarsRun r;
  r.result = t.run();
  for (auto& [name, v] : t.snapshot()) r.state[name] = std::move(v);
  return r;
}
}  // namespace

TEST(CudaLars, OneCycleLarsTrainsAsOnTheCpu) {
  FRESCO_REQUIRE_GPU();
  const LarsRun cpu = train("cpu"), gpu = train("cuda");
  ASSERT_EQ(cpu.result.epochs.size(), 3u);
  ASSERT_EQ(gpu.result.epochs.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(gpu.result.epochs[e].train_loss, cpu.result.epochs[e].train_loss,
                1e-4 * std::fabs(cpu.result.epochs[e].train_loss))
        << "epoch " << e + 1;
    EXPECT_EQ(gpu.result.epochs[e].lr, cpu.result.epochs[e].lr) << "epoch " << e + 1;
  }
  EXPECT_LT(cpu.result.epochs[2].train_loss, cpu.result.epochs[0].train_loss);  // it trained
  ASSERT_EQ(gpu.state.size(), cpu.state.size());
  for (const auto& [name, c] : cpu.state) {
    if (name.rfind("G(", 0) == 0) continue;  // the last step's gradients: within the weights' test
    const std::vector<float>& g = gpu.state.at(name);
    ASSERT_EQ(g.size(), c.size()) << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      diff += (static_cast<double>(g[i]) - c[i]) * (static_cast<double>(g[i]) - c[i]);
      norm += static_cast<double>(c[i]) * c[i];
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm) + 1e-7) << name;
  }
}
