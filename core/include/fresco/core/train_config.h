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
  enum class Type { SGD, ADAM, ADAMW } type = Type::ADAMW;
  float lr = 1e-3f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  bool no_decay_1d = false;  // biases (and BN weight/bias) get weight_decay 0

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
  bool uses_v() const { return type != Type::SGD; }
  const char* name() const;
  void validate() const;
};

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

struct Scheduler {
  enum class Type { CONSTANT, COSINE, TABLE } type = Type::CONSTANT;
  float min_lr = 0.0f;
  int32_t warmup_epochs = 0;
  std::vector<float> table;  // TABLE: the lr of every step

  Scheduler& warmup(int32_t epochs) {
    warmup_epochs = epochs;
    return *this;
  }
  const char* name() const;
  void validate() const;
};
inline Scheduler ConstantLR() {
  return Scheduler{};
}
inline Scheduler CosineAnnealingLR() {
  Scheduler s;
  s.type = Scheduler::Type::COSINE;
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

}  // namespace fresco
