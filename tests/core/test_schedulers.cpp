// The per-epoch schedulers (train_config.h: StepLR, MultiStepLR, ExponentialLR, PolynomialLR,
// CosineAnnealingWarmRestarts, as PyTorch's
// stepped once per epoch, epochs counted after the warm-up): every step's lr against the closed forms, the
// warm-up identical to the device's, and the settings that are refused. The job-file keys are in
// test_blueprint.cpp; training with one in tests/e2e/test_epoch_report_cpu.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fresco/core/error.h"
#include "fresco/core/train_config.h"
#include "fresco/update_rules.h"
#include "support/error_of.h"

using namespace fresco;
using fresco::test::error_of;

namespace {
// The lr at each epoch of the schedule (after the warm-up), read at the epoch's first and last step.
std::vector<float> per_epoch(const Scheduler& s, float base, int64_t spe, int32_t epochs) {
  const std::vector<float> t = s.step_table(base, spe, epochs);
  EXPECT_EQ(t.size(), static_cast<size_t>(spe * epochs));
  std::vector<float> out;
  for (int32_t e = s.warmup_epochs; e < epochs; ++e) {
    EXPECT_EQ(t[static_cast<size_t>(e * spe)], t[static_cast<size_t>((e + 1) * spe - 1)]) << "epoch " << e;
    out.push_back(t[static_cast<size_t>(e * spe)]);
  }
  return out;
}
}  // namespace

TEST(Schedulers, PerEpochValuesAreTheClosedForms) {
  EXPECT_EQ(per_epoch(StepLR(2, 0.5f), 0.1f, 3, 5), (std::vector<float>{0.1f, 0.1f, 0.05f, 0.05f, 0.025f}));
  const auto g2 =
      static_cast<float>(std::pow(static_cast<double>(0.1f), 2.0));  // gamma^2 in double, as PyTorch
  EXPECT_EQ(per_epoch(MultiStepLR({1, 3}, 0.1f), 1.0f, 2, 5), (std::vector<float>{1.0f, 0.1f, 0.1f, g2, g2}));
  const std::vector<float> ex = per_epoch(ExponentialLR(0.9f), 0.2f, 4, 4);
  for (size_t e = 0; e < ex.size(); ++e)
    EXPECT_EQ(ex[e], static_cast<float>(0.2f * std::pow(static_cast<double>(0.9f), static_cast<double>(e))));
  EXPECT_EQ(per_epoch(PolynomialLR(2.0f, 4), 1.0f, 1, 6),
            (std::vector<float>{1.0f, 0.5625f, 0.25f, 0.0625f, 0.0f, 0.0f}));
  // total_epochs 0: the run's epochs after the warm-up reach 0 just after the last
  EXPECT_EQ(per_epoch(PolynomialLR(1.0f).warmup(1), 1.0f, 2, 5),
            (std::vector<float>{1.0f, 0.75f, 0.5f, 0.25f}));
}

// CosineAnnealingWarmRestarts(T_0 = 2, T_mult = 2): cycles of 2, 4, 8 epochs, each from base_lr down
// towards min_lr, as PyTorch's T_cur / T_i.
TEST(Schedulers, CosineRestartsCycleLikePyTorch) {
  const std::vector<float> got = per_epoch(CosineAnnealingWarmRestarts(2, 2, 0.1f), 1.0f, 2, 7);
  const double pi = 3.14159265358979323846;
  auto at = [&](int cur, int len) {
    const double lo = 0.1f;  // min_lr as the float it is
    return static_cast<float>(lo + (1.0 - lo) * 0.5 * (1.0 + std::cos(pi * cur / len)));
  };
  EXPECT_EQ(got, (std::vector<float>{at(0, 2), at(1, 2), at(0, 4), at(1, 4), at(2, 4), at(3, 4), at(0, 8)}));
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 0.55f);
}

TEST(Schedulers, WarmUpIsTheDevicesThenTheScheduleStartsAtItsEpochZero) {
  Scheduler s = MultiStepLR({2}, 0.5f).warmup(2);
  const std::vector<float> t = s.step_table(0.4f, 3, 6);
  FrScheduleParams dev{};  // the device's constant schedule with the same warm-up
  dev.kind = FR_SCHED_CONSTANT;
  dev.warmup_steps = 6;
  dev.total_steps = 18;
  dev.base_lr = 0.4f;
  for (int32_t step = 0; step < 6; ++step)
    EXPECT_EQ(t[static_cast<size_t>(step)], fr_schedule_lr(&dev, step, nullptr));
  EXPECT_EQ(t[6], 0.4f);   // schedule epoch 0
  EXPECT_EQ(t[11], 0.4f);  // schedule epoch 1
  EXPECT_EQ(t[12], 0.2f);  // schedule epoch 2: the milestone
  EXPECT_EQ(t[17], 0.2f);
}

TEST(Schedulers, RefusedSettings) {
  EXPECT_NE(error_of([] { StepLR(0).validate(); }).second.find("step_size must be 1 or more"),
            std::string::npos);
  EXPECT_NE(error_of([] { ExponentialLR(1.5f).validate(); }).second.find("gamma must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([] { ExponentialLR(NAN).validate(); }).second.find("gamma"), std::string::npos);
  EXPECT_NE(error_of([] {
              MultiStepLR({3, 2}).validate();
            }).second.find("milestones must be increasing"),
            std::string::npos);
  EXPECT_NE(error_of([] { MultiStepLR({}).validate(); }).second.find("milestones"), std::string::npos);
  EXPECT_NE(error_of([] { PolynomialLR(-1.0f).validate(); }).second.find("power"), std::string::npos);
  EXPECT_NE(error_of([] { CosineAnnealingWarmRestarts(0).validate(); }).second.find("t0 must be 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { StepLR(1).warmup(4).step_table(0.1f, 2, 3); }).second.find("longer than the run"),
            std::string::npos);
  // a table too large for the S region is refused before it is built
  EXPECT_NE(error_of([] { StepLR(1).step_table(0.1f, 60000, 40000); }).second.find("runs as one lr per step"),
            std::string::npos);
}
