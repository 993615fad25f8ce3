// The table schedulers (train_config.h: StepLR, MultiStepLR, ExponentialLR, PolynomialLR,
// CosineAnnealingWarmRestarts, as PyTorch's stepped once per epoch, epochs counted after the warm-up; and
// OneCycleLR, stepped every step, with its momenta): every step's lr against the closed forms or PyTorch's
// values, the warm-up identical to the device's, and the settings that are refused. The job-file keys are in
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

// OneCycleLR (Scheduler::ONE_CYCLE): every step's lr and momentum as PyTorch's get_lr computes them over
// total_steps = epochs x steps per epoch, max_lr the optimizer's lr. The expected floats are PyTorch's
// OneCycleLR formulas (torch/optim/lr_scheduler.py: the phases' end steps pct_start * total - 1 (and 2 *
// pct_start * total - 2 in three phases), then total - 1; cosine or linear annealing in double) evaluated
// in Python and rounded to float, as PyTorch's SGD uses the group's lr and momentum.
TEST(Schedulers, OneCycleIsPyTorchsPerStep) {
  const Scheduler two = OneCycleLR();  // cos, pct_start 0.3, div 25, final_div 1e4, momenta 0.95 / 0.85
  EXPECT_TRUE(two.runs_as_table());
  EXPECT_FALSE(two.per_epoch());
  EXPECT_EQ(two.step_table(1.0f, 5, 2),
            (std::vector<float>{0.03999999910593033f, 0.5199999809265137f, 1.0f, 0.9504846334457397f,
                                0.8117456436157227f, 0.6112620234489441f, 0.38874197006225586f,
                                0.1882583498954773f, 0.0495193675160408f, 3.999999989900971e-06f}));
  EXPECT_EQ(
      two.momentum_table(5, 2),
      (std::vector<float>{0.949999988079071f, 0.8999999761581421f, 0.8500000238418579f, 0.8549515604972839f,
                          0.8688254952430725f, 0.8888739347457886f, 0.9111260175704956f, 0.9311745166778564f,
                          0.945048451423645f, 0.949999988079071f}));
  Scheduler three = OneCycleLR(0.25);
  three.three_phase = true;
  three.anneal_linear = true;
  const std::vector<float> lr = three.step_table(0.5f, 4, 5), m = three.momentum_table(4, 5);
  const std::vector<float> want_lr = {0.019999999552965164f,
                                      0.14000000059604645f,
                                      0.25999999046325684f,
                                      0.3799999952316284f,
                                      0.5f,
                                      0.3799999952316284f,
                                      0.25999999046325684f,
                                      0.14000000059604645f,
                                      0.019999999552965164f,
                                      0.018182000145316124f,
                                      0.016364000737667084f,
                                      0.014546000398695469f,
                                      0.012728000059723854f,
                                      0.01090999972075224f,
                                      0.009092000313103199f,
                                      0.007273999974131584f,
                                      0.005456000100821257f,
                                      0.0036379999946802855f,
                                      0.001820000004954636f,
                                      1.9999999949504854e-06f};
  EXPECT_EQ(lr, want_lr);
  ASSERT_EQ(m.size(), 20u);
  EXPECT_EQ(m[0], 0.949999988079071f);
  EXPECT_EQ(m[2], 0.8999999761581421f);
  EXPECT_EQ(m[4], 0.8500000238418579f);  // the peak lr's step: base_momentum
  EXPECT_EQ(m[7], 0.925000011920929f);
  for (size_t i = 8; i < m.size(); ++i) EXPECT_EQ(m[i], 0.949999988079071f) << i;  // the third phase
  // the table the device runs: the lrs with their momenta; no momenta without cycle_momentum
  const Scheduler run = two.as_table(1.0f, 5, 2);
  EXPECT_EQ(run.type, Scheduler::Type::TABLE);
  EXPECT_EQ(run.table, two.step_table(1.0f, 5, 2));
  EXPECT_EQ(run.momenta, two.momentum_table(5, 2));
  Scheduler fixed = OneCycleLR();
  fixed.cycle_momentum = false;
  EXPECT_TRUE(fixed.as_table(1.0f, 5, 2).momenta.empty());
  EXPECT_TRUE(StepLR(1).as_table(0.1f, 2, 2).momenta.empty());
}

TEST(Schedulers, OneCycleRefusals) {
  // 3 steps at pct_start 0.3: the first phase would end at step -0.1 (PyTorch divides by its length)
  EXPECT_NE(error_of([] { OneCycleLR().step_table(0.1f, 3, 1); }).second.find("phases need more steps"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Scheduler s = OneCycleLR(0.6);
              s.three_phase = true;
              s.step_table(0.1f, 10, 1);
            }).second.find("phases need more steps"),
            std::string::npos);
  EXPECT_NE(error_of([] { OneCycleLR().warmup(1).validate(); }).second.find("warms up itself"),
            std::string::npos);
  EXPECT_NE(error_of([] { OneCycleLR(1.5).validate(); }).second.find("pct_start must be in"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Scheduler s = OneCycleLR();
              s.div_factor = 0.0;
              s.validate();
            }).second.find("div_factor"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Scheduler s = OneCycleLR();
              s.max_momentum = 1.0;
              s.validate();
            }).second.find("max_momentum"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Scheduler s = TableLR({0.1f, 0.2f});
              s.momenta = {0.9f};
              s.validate();
            }).second.find("table of momenta has 1 steps"),
            std::string::npos);
}
