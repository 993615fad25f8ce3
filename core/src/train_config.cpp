// Validation of training configuration objects.
#include "fresco/core/train_config.h"

#include <algorithm>
#include <cmath>

#include "fresco/core/error.h"
#include "fresco/ops.h"

namespace fresco {

namespace {
void check_finite_range(float v, float lo, float hi, const std::string& field) {
  FRESCO_CHECK(std::isfinite(v) && v >= lo && v <= hi, ErrorCode::kBadConfig,
               field + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], found " +
                   std::to_string(v));
}
}  // namespace

void CrossEntropyLoss::validate() const {
  check_finite_range(smoothing, 0.0f, 1.0f, "loss.label_smoothing");
}

const char* Optimizer::name() const {
  switch (type) {
    case Type::SGD:
      return "sgd";
    case Type::ADAM:
      return "adam";
    case Type::ADAMW:
      return "adamw";
    case Type::LARS:
      return "lars";
  }
  return "?";
}

void Optimizer::validate() const {
  check_finite_range(lr, 0.0f, 1e3f, "optimizer.lr");
  check_finite_range(weight_decay, 0.0f, 1e3f, "optimizer.weight_decay");
  check_finite_range(momentum, 0.0f, 1.0f, "optimizer.momentum");
  FRESCO_CHECK(
      !(nesterov && momentum <= 0.0f), ErrorCode::kBadConfig,
      "optimizer: nesterov needs a momentum > 0 (PyTorch rule), found momentum " + std::to_string(momentum));
  if (type == Type::LARS) {
    FRESCO_CHECK(!nesterov, ErrorCode::kBadConfig, "optimizer: lars has no nesterov momentum");
    FRESCO_CHECK(no_decay_1d, ErrorCode::kBadConfig,
                 "optimizer: lars always excludes the 1-D parameters (no_decay_1d must stay on)");
    FRESCO_CHECK(std::isfinite(eta) && eta > 0.0f && eta <= 1e3f, ErrorCode::kBadConfig,
                 "optimizer.eta must be in (0, 1000], found " + std::to_string(eta));
  }
  check_finite_range(beta1, 0.0f, 0.999999f, "optimizer.beta1");
  check_finite_range(beta2, 0.0f, 0.999999999f, "optimizer.beta2");
  FRESCO_CHECK(std::isfinite(eps) && eps > 0.0f, ErrorCode::kBadConfig,
               "optimizer.eps must be positive, found " + std::to_string(eps));
}

const char* Scheduler::name() const {
  switch (type) {
    case Type::CONSTANT:
      return "constant";
    case Type::COSINE:
      return "cosine";
    case Type::TABLE:
      return "table";
    case Type::STEP:
      return "step";
    case Type::MULTISTEP:
      return "multistep";
    case Type::EXPONENTIAL:
      return "exponential";
    case Type::POLYNOMIAL:
      return "polynomial";
    case Type::COSINE_RESTARTS:
      return "cosine_restarts";
    case Type::ONE_CYCLE:
      return "one_cycle";
  }
  return "?";
}

bool Scheduler::per_epoch() const noexcept {
  return type == Type::STEP || type == Type::MULTISTEP || type == Type::EXPONENTIAL ||
         type == Type::POLYNOMIAL || type == Type::COSINE_RESTARTS;
}

namespace {
// PyTorch's OneCycleLR at every step of a run of `steps` steps with max_lr = base_lr: the lr (momentum =
// false) or the momentum of each, from its phases' end steps, annealed in double as PyTorch's get_lr does.
std::vector<float> one_cycle(const Scheduler& s, double max_lr, int64_t steps, bool momentum) {
  const double total = static_cast<double>(steps), initial = max_lr / s.div_factor,
               min_lr = initial / s.final_div_factor, up = s.pct_start * total - 1.0;
  struct Phase {
    double end, lr0, lr1, m0, m1;
  };
  std::vector<Phase> phases;
  if (s.three_phase)
    phases = {{up, initial, max_lr, s.max_momentum, s.base_momentum},
              {2.0 * s.pct_start * total - 2.0, max_lr, initial, s.base_momentum, s.max_momentum},
              {total - 1.0, initial, min_lr, s.max_momentum, s.max_momentum}};
  else
    phases = {{up, initial, max_lr, s.max_momentum, s.base_momentum},
              {total - 1.0, max_lr, min_lr, s.base_momentum, s.max_momentum}};
  double start = 0.0;
  for (const Phase& ph : phases) {  // PyTorch divides by each phase's length
    FRESCO_CHECK(ph.end - start > 0.0, ErrorCode::kBadConfig,
                 "scheduler: one_cycle's phases need more steps: with pct_start " +
                     std::to_string(s.pct_start) + (s.three_phase ? " (three phases)" : "") + " over " +
                     std::to_string(steps) + " steps a phase would last " + std::to_string(ph.end - start) +
                     " steps");
    start = ph.end;
  }
  auto anneal = [&](double a, double b, double pct) {
    return s.anneal_linear ? (b - a) * pct + a
                           : b + (a - b) / 2.0 * (std::cos(3.14159265358979323846 * pct) + 1.0);
  };
  std::vector<float> out(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    const double step = static_cast<double>(k);
    double begin = 0.0;
    for (size_t i = 0; i < phases.size(); ++i) {
      const Phase& ph = phases[i];
      if (step <= ph.end || i + 1 == phases.size()) {
        const double pct = (step - begin) / (ph.end - begin);
        out[static_cast<size_t>(k)] =
            static_cast<float>(momentum ? anneal(ph.m0, ph.m1, pct) : anneal(ph.lr0, ph.lr1, pct));
        break;
      }
      begin = ph.end;
    }
  }
  return out;
}
}  // namespace

std::vector<float> Scheduler::momentum_table(int64_t steps_per_epoch, int32_t epochs) const {
  if (type != Type::ONE_CYCLE || !cycle_momentum) return {};
  validate();
  return one_cycle(*this, 0.0, steps_per_epoch * epochs, true);
}

Scheduler Scheduler::as_table(float base_lr, int64_t steps_per_epoch, int32_t epochs) const {
  Scheduler t = TableLR(step_table(base_lr, steps_per_epoch, epochs));
  t.momenta = momentum_table(steps_per_epoch, epochs);
  return t;
}

std::vector<float> Scheduler::step_table(float base_lr, int64_t steps_per_epoch, int32_t epochs) const {
  validate();
  FRESCO_CHECK(steps_per_epoch > 0 && epochs > 0, ErrorCode::kBadConfig,
               "scheduler: a table needs steps in the run");
  FRESCO_CHECK(warmup_epochs <= epochs, ErrorCode::kBadConfig,
               "scheduler.warmup_epochs: a warm-up of " + std::to_string(warmup_epochs) +
                   " epochs is longer than the run (" + std::to_string(epochs) + " epochs)");
  const int64_t warmup_steps = static_cast<int64_t>(warmup_epochs) * steps_per_epoch;
  const int64_t steps = static_cast<int64_t>(epochs) * steps_per_epoch;
  // one float per step on the host and in the device's S region: at most 2^27 steps (512 MiB)
  constexpr int64_t kMaxTableSteps = int64_t{1} << 27;
  FRESCO_CHECK(steps <= kMaxTableSteps, ErrorCode::kBadConfig,
               std::string("scheduler: a ") + name() +
                   " schedule runs as one lr per step, and this run has " + std::to_string(steps) +
                   " steps; at most " + std::to_string(kMaxTableSteps) +
                   " are supported (constant and cosine have no table)");
  if (type == Type::ONE_CYCLE) return one_cycle(*this, static_cast<double>(base_lr), steps, false);
  const int32_t horizon = total_epochs > 0 ? total_epochs : epochs - warmup_epochs;
  std::vector<float> out(static_cast<size_t>(steps));
  int64_t restart_epoch = 0, cur = 0, len = t0;  // COSINE_RESTARTS: the cycle at schedule epoch restart_epoch
  for (int64_t s = 0; s < steps; ++s) {
    if (s < warmup_steps) {  // as fr_schedule_lr computes the warm-up on the device
      out[static_cast<size_t>(s)] =
          base_lr * static_cast<float>(s + 1) / static_cast<float>(static_cast<int32_t>(warmup_steps));
      continue;
    }
    const int64_t e = (s - warmup_steps) / steps_per_epoch;  // epochs of the schedule itself
    double f = 1.0;
    switch (type) {
      case Type::STEP:
        f = std::pow(static_cast<double>(gamma), static_cast<double>(e / step_size));
        break;
      case Type::MULTISTEP: {
        int64_t passed = 0;
        for (int32_t m : milestones) passed += e >= m ? 1 : 0;
        f = std::pow(static_cast<double>(gamma), static_cast<double>(passed));
        break;
      }
      case Type::EXPONENTIAL:
        f = std::pow(static_cast<double>(gamma), static_cast<double>(e));
        break;
      case Type::POLYNOMIAL:
        f = horizon > 0 ? std::pow(1.0 - static_cast<double>(std::min<int64_t>(e, horizon)) / horizon,
                                   static_cast<double>(power))
                        : 1.0;
        break;
      case Type::COSINE_RESTARTS: {  // PyTorch's T_cur and T_i after e epoch steps, advanced as e grows
        for (; restart_epoch < e; ++restart_epoch)
          if (++cur >= len) cur -= len, len = std::min<int64_t>(len * t_mult, int64_t{1} << 40);
        const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * static_cast<double>(cur) / len));
        out[static_cast<size_t>(s)] =
            static_cast<float>(min_lr + (static_cast<double>(base_lr) - min_lr) * cosine);
        continue;
      }
      default:
        break;
    }
    out[static_cast<size_t>(s)] = static_cast<float>(static_cast<double>(base_lr) * f);
  }
  return out;
}

void Scheduler::validate() const {
  FRESCO_CHECK(warmup_epochs >= 0, ErrorCode::kBadConfig,
               "scheduler.warmup_epochs must be >= 0, found " + std::to_string(warmup_epochs));
  check_finite_range(min_lr, 0.0f, 1e3f, "scheduler.min_lr");
  if (type == Type::STEP)
    FRESCO_CHECK(step_size >= 1, ErrorCode::kBadConfig,
                 "scheduler.step_size must be 1 or more epochs, found " + std::to_string(step_size));
  if (type == Type::STEP || type == Type::MULTISTEP || type == Type::EXPONENTIAL)
    FRESCO_CHECK(std::isfinite(gamma) && gamma > 0.0f && gamma <= 1.0f, ErrorCode::kBadConfig,
                 "scheduler.gamma must be in (0, 1], found " + std::to_string(gamma));
  if (type == Type::MULTISTEP) {
    FRESCO_CHECK(!milestones.empty(), ErrorCode::kBadConfig, "scheduler.milestones: give at least one epoch");
    for (size_t i = 0; i < milestones.size(); ++i)
      FRESCO_CHECK(milestones[i] >= 1 && (i == 0 || milestones[i] > milestones[i - 1]), ErrorCode::kBadConfig,
                   "scheduler.milestones must be increasing epochs of 1 or more, found " +
                       std::to_string(milestones[i]) + " at position " + std::to_string(i));
  }
  if (type == Type::POLYNOMIAL) {
    FRESCO_CHECK(std::isfinite(power) && power >= 0.0f && power <= 1e3f, ErrorCode::kBadConfig,
                 "scheduler.power must be in [0, 1000], found " + std::to_string(power));
    FRESCO_CHECK(
        total_epochs >= 0, ErrorCode::kBadConfig,
        "scheduler.total_epochs must be 0 (the run's) or more, found " + std::to_string(total_epochs));
  }
  if (type == Type::COSINE_RESTARTS)
    FRESCO_CHECK(t0 >= 1 && t_mult >= 1, ErrorCode::kBadConfig,
                 "scheduler: t0 must be 1 or more epochs and t_mult 1 or more, found t0 " +
                     std::to_string(t0) + ", t_mult " + std::to_string(t_mult));
  if (type == Type::ONE_CYCLE) {
    FRESCO_CHECK(warmup_epochs == 0, ErrorCode::kBadConfig,
                 "scheduler: one_cycle warms up itself (pct_start); warmup_epochs must be 0, found " +
                     std::to_string(warmup_epochs));
    auto check = [](double v, double lo, double hi, bool open_lo, const std::string& field) {
      FRESCO_CHECK(std::isfinite(v) && (open_lo ? v > lo : v >= lo) && v <= hi, ErrorCode::kBadConfig,
                   "scheduler." + field + " must be in " + (open_lo ? "(" : "[") + std::to_string(lo) + ", " +
                       std::to_string(hi) + "], found " + std::to_string(v));
    };
    check(pct_start, 0.0, 1.0, false, "pct_start");
    check(div_factor, 0.0, 1e12, true, "div_factor");
    check(final_div_factor, 0.0, 1e12, true, "final_div_factor");
    check(base_momentum, 0.0, 0.999999, false, "base_momentum");
    check(max_momentum, 0.0, 0.999999, false, "max_momentum");
  }
  FRESCO_CHECK(momenta.empty() || type == Type::TABLE, ErrorCode::kBadConfig,
               "scheduler: a table of momenta goes with a table of lrs");
  if (type == Type::TABLE) {
    FRESCO_CHECK(!table.empty(), ErrorCode::kBadConfig, "scheduler: a table schedule needs at least one lr");
    FRESCO_CHECK(momenta.empty() || momenta.size() == table.size(), ErrorCode::kBadConfig,
                 "scheduler: the table of momenta has " + std::to_string(momenta.size()) +
                     " steps, the lrs " + std::to_string(table.size()));
    for (size_t i = 0; i < momenta.size(); ++i)
      check_finite_range(momenta[i], 0.0f, 0.999999f, "scheduler.momenta[" + std::to_string(i) + "]");
    for (size_t i = 0; i < table.size(); ++i)
      check_finite_range(table[i], 0.0f, 1e3f, "scheduler.table[" + std::to_string(i) + "]");
  }
}

void Normalization::validate(int64_t channels) const {
  FRESCO_CHECK(channels >= 1 && channels <= FR_MAX_NORM_CHANNELS, ErrorCode::kBadConfig,
               "input has " + std::to_string(channels) + " channels; normalisation supports 1.." +
                   std::to_string(FR_MAX_NORM_CHANNELS));
  FRESCO_CHECK(mean.size() == static_cast<size_t>(channels) && std.size() == static_cast<size_t>(channels),
               ErrorCode::kBadConfig,
               "normalize: expected " + std::to_string(channels) +
                   " mean and std values (one per channel), found " + std::to_string(mean.size()) + " and " +
                   std::to_string(std.size()));
  for (size_t i = 0; i < std.size(); ++i)
    FRESCO_CHECK(std::isfinite(std[i]) && std[i] > 0.0f && std::isfinite(mean[i]), ErrorCode::kBadConfig,
                 "normalize: std[" + std::to_string(i) + "] must be positive and mean finite");
}

void ProgressiveResolution::validate(int64_t data_h, int64_t data_w, int32_t epochs) const {
  if (!enabled()) {
    FRESCO_CHECK(begin_epochs == 0 && begin_h == 0 && begin_w == 0 && end_h == 0 && end_w == 0,
                 ErrorCode::kBadConfig,
                 "progressive_resolution: begin_epochs must be 1 or more when resolutions are given, found " +
                     std::to_string(begin_epochs));
    return;
  }
  auto side = [&](int64_t v, int64_t data, const char* what) {
    FRESCO_CHECK(v >= 0 && v <= data, ErrorCode::kBadConfig,
                 std::string("progressive_resolution: ") + what + " must be in [1, " + std::to_string(data) +
                     "] (the data's; images are only made smaller) or 0 for the data's, found " +
                     std::to_string(v));
  };
  side(begin_h, data_h, "begin height");
  side(begin_w, data_w, "begin width");
  side(end_h, data_h, "end height");
  side(end_w, data_w, "end width");
  FRESCO_CHECK(begin_epochs < epochs, ErrorCode::kBadConfig,
               "progressive_resolution: begin_epochs " + std::to_string(begin_epochs) +
                   " leaves no epoch of the job's " + std::to_string(epochs) +
                   " at the end resolution (to train at one resolution, give begin and end the same)");
}

}  // namespace fresco
