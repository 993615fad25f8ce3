// Training configuration objects: loss, optimizer, scheduler, input normalisation. Builder-style setters,
// PyTorch defaults. Invariant: every value is validated by validate() before compile, with a message naming
// the field. Tested by test_train_config.cpp and the golden cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fresco {

struct CrossEntropyLoss {
  float smoothing = 0.0f;
  CrossEntropyLoss& label_smoothing(float s) {
    smoothing = s;
    return *this;
  }
  void validate() const;
};

struct Optimizer {
  enum class Type { SGD, ADAM, ADAMW, LARS } type = Type::ADAMW;
  float lr = 1e-3f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  bool no_decay_1d = false;  // biases (and BN weight/bias) get weight_decay 0
  float eta = 1e-3f;         // LARS: the trust coefficient

  Optimizer& base_lr(float v) {
    lr = v;
    return *this;
  }
  Optimizer& with_weight_decay(float v) {
    weight_decay = v;
    return *this;
  }
  Optimizer& with_no_decay_1d(bool v = true) {
    no_decay_1d = v;
    return *this;
  }
  bool uses_m() const { return type != Type::SGD || momentum != 0.0f; }
  bool uses_v() const { return type == Type::ADAM || type == Type::ADAMW; }
  const char* name() const;
  void validate() const;
};

// LARS (You et al.) as the Barlow Twins / VICReg recipes' PyTorch LARS: per weight tensor, the trust ratio
// eta ||w|| / ||g + wd w|| scales the decayed gradient before SGD momentum (no dampening, no Nesterov); the
// 1-D parameters (biases, batchnorm's weight and bias) are excluded from both the decay and the ratio, as
// their lars_adaptation_filter and weight_decay_filter do (no_decay_1d is always on). ops.h: lars_update.
inline Optimizer LARS(float momentum = 0.9f, float eta = 1e-3f) {
  Optimizer o;
  o.type = Optimizer::Type::LARS;
  o.lr = 0.1f;
  o.momentum = momentum;
  o.eta = eta;
  o.no_decay_1d = true;
  return o;
}
inline Optimizer SGD(float momentum = 0.0f, bool nesterov = false) {
  Optimizer o;
  o.type = Optimizer::Type::SGD;
  o.lr = 0.01f;
  o.momentum = momentum;
  o.nesterov = nesterov;
  return o;
}
inline Optimizer Adam() {
  Optimizer o;
  o.type = Optimizer::Type::ADAM;
  o.weight_decay = 0.0f;
  return o;
}
inline Optimizer AdamW() {
  Optimizer o;
  o.type = Optimizer::Type::ADAMW;
  o.weight_decay = 1e-2f;
  return o;
}

// The learning-rate schedule. CONSTANT and COSINE (to min_lr, per step) are computed on the device; TABLE
// gives every step's lr. STEP, MULTISTEP, EXPONENTIAL, POLYNOMIAL and COSINE_RESTARTS are PyTorch's StepLR,
// MultiStepLR, ExponentialLR, PolynomialLR and CosineAnnealingWarmRestarts (to min_lr) stepped once per
// epoch: the lr changes at epoch boundaries, epochs counted from the end of the warm-up (as PyTorch's
// SequentialLR(warm-up, schedule) counts them); they run as a table computed at compile time (step_table).
// Every kind but ONE_CYCLE may start with a linear warm-up of warmup_epochs. ONE_CYCLE is PyTorch's
// OneCycleLR stepped every step over the whole run (total_steps = epochs x steps per epoch), with the
// optimizer's lr as its max_lr: a table of lrs, and, with cycle_momentum, a table of momenta (SGD's momentum,
// Adam's beta1) the optimizers read per step (momentum_table; ops.h, FR_KERNEL_STEP_MOMENTUM).
struct Scheduler {
  enum class Type {
    CONSTANT,
    COSINE,
    TABLE,
    STEP,
    MULTISTEP,
    EXPONENTIAL,
    POLYNOMIAL,
    COSINE_RESTARTS,
    ONE_CYCLE
  } type = Type::CONSTANT;
  float min_lr = 0.0f;
  int32_t warmup_epochs = 0;
  std::vector<float> table;         // TABLE: the lr of every step
  int32_t step_size = 1;            // STEP: epochs between decays
  float gamma = 0.1f;               // STEP, MULTISTEP, EXPONENTIAL: the decay factor
  std::vector<int32_t> milestones;  // MULTISTEP: epochs (after the warm-up) where the lr decays
  float power = 1.0f;               // POLYNOMIAL: lr = base (1 - e / total_epochs)^power
  int32_t total_epochs = 0;         // POLYNOMIAL: epochs to reach 0 (0: the run's epochs after the warm-up)
  int32_t t0 = 1, t_mult = 1;       // COSINE_RESTARTS: the first cycle's epochs, each next cycle's factor
  // ONE_CYCLE (PyTorch's names and defaults; kept in double, as PyTorch computes the schedule)
  double pct_start = 0.3;         // the share of the steps that raise the lr
  bool anneal_linear = false;     // anneal_strategy "linear" (else "cos")
  double div_factor = 25.0;       // initial lr = max_lr / div_factor
  double final_div_factor = 1e4;  // min lr = initial lr / final_div_factor
  bool three_phase = false;       // back to the initial lr, then down to the min lr
  bool cycle_momentum = true;     // momentum between max_momentum and base_momentum, inversely to the lr
  double base_momentum = 0.85, max_momentum = 0.95;
  std::vector<float> momenta;  // TABLE: the momentum (Adam: beta1) of every step, when it cycles

  Scheduler& warmup(int32_t epochs) {
    warmup_epochs = epochs;
    return *this;
  }
  const char* name() const;
  void validate() const;
  // Whether this kind runs as a table of per-epoch values (STEP, MULTISTEP, EXPONENTIAL, POLYNOMIAL).
  bool per_epoch() const noexcept;
  // Whether the device runs this kind as a table of per-step values (the per-epoch kinds and ONE_CYCLE).
  bool runs_as_table() const noexcept { return per_epoch() || type == Type::ONE_CYCLE; }
  // The momentum of every step of such a run (ONE_CYCLE with cycle_momentum), else empty.
  std::vector<float> momentum_table(int64_t steps_per_epoch, int32_t epochs) const;
  // The table this kind runs as over such a run: TableLR(step_table(...)) with its momenta.
  Scheduler as_table(float base_lr, int64_t steps_per_epoch, int32_t epochs) const;
  // The lr of every step of a run of `epochs` epochs of `steps_per_epoch` steps: the warm-up as the device
  // computes it (base_lr (step + 1) / warm-up steps), then this kind's value for the step's epoch. A warm-up
  // longer than the run is a kBadConfig error.
  std::vector<float> step_table(float base_lr, int64_t steps_per_epoch, int32_t epochs) const;
};
inline Scheduler ConstantLR() {
  return Scheduler{};
}
inline Scheduler CosineAnnealingLR() {
  Scheduler s;
  s.type = Scheduler::Type::COSINE;
  return s;
}
inline Scheduler StepLR(int32_t step_size, float gamma = 0.1f) {
  Scheduler s;
  s.type = Scheduler::Type::STEP;
  s.step_size = step_size;
  s.gamma = gamma;
  return s;
}
inline Scheduler MultiStepLR(std::vector<int32_t> milestones, float gamma = 0.1f) {
  Scheduler s;
  s.type = Scheduler::Type::MULTISTEP;
  s.milestones = std::move(milestones);
  s.gamma = gamma;
  return s;
}
inline Scheduler ExponentialLR(float gamma) {
  Scheduler s;
  s.type = Scheduler::Type::EXPONENTIAL;
  s.gamma = gamma;
  return s;
}
inline Scheduler PolynomialLR(float power = 1.0f, int32_t total_epochs = 0) {
  Scheduler s;
  s.type = Scheduler::Type::POLYNOMIAL;
  s.power = power;
  s.total_epochs = total_epochs;
  return s;
}
inline Scheduler CosineAnnealingWarmRestarts(int32_t t0, int32_t t_mult = 1, float min_lr = 0.0f) {
  Scheduler s;
  s.type = Scheduler::Type::COSINE_RESTARTS;
  s.t0 = t0;
  s.t_mult = t_mult;
  s.min_lr = min_lr;
  return s;
}
// PyTorch's OneCycleLR with its defaults (max_lr is the optimizer's lr); set the other fields to change them.
inline Scheduler OneCycleLR(double pct_start = 0.3) {
  Scheduler s;
  s.type = Scheduler::Type::ONE_CYCLE;
  s.pct_start = pct_start;
  return s;
}
inline Scheduler TableLR(std::vector<float> lrs) {
  Scheduler s;
  s.type = Scheduler::Type::TABLE;
  s.table = std::move(lrs);
  return s;
}

struct Normalization {
  std::vector<float> mean{0.0f}, std{1.0f};  // per channel, applied to x/255
  void validate(int64_t channels) const;
};

// Progressive resolution (DESIGN §7, its two stages): the first `begin_epochs` epochs train on images
// resized to begin_h x begin_w, the others at end_h x end_w (0: the data's height or width); evaluation is
// always at the data's resolution. Images are only made smaller: each side at most the data's, resized by
// area averaging (data/resize.h) after the augmentation, while the batch is staged. The model must not
// depend on the resolution but through its maps' sizes (a global pool before the classifier, not a flatten
// of a spatial map). begin_epochs 0: off, one stage at the data's resolution.
struct ProgressiveResolution {
  int64_t begin_h = 0, begin_w = 0, end_h = 0, end_w = 0;
  int32_t begin_epochs = 0;
  bool enabled() const noexcept { return begin_epochs > 0; }
  // Against the data's sides and the job's epochs (the end stage must run): kBadConfig naming the field.
  void validate(int64_t data_h, int64_t data_w, int32_t epochs) const;
};

}  // namespace fresco
