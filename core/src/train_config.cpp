// Validation of training configuration objects.
#include "fresco/core/train_config.h"

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
  }
  return "?";
}

void Scheduler::validate() const {
  FRESCO_CHECK(warmup_epochs >= 0, ErrorCode::kBadConfig,
               "scheduler.warmup_epochs must be >= 0, found " + std::to_string(warmup_epochs));
  check_finite_range(min_lr, 0.0f, 1e3f, "scheduler.min_lr");
  if (type == Type::TABLE) {
    FRESCO_CHECK(!table.empty(), ErrorCode::kBadConfig, "scheduler: a table schedule needs at least one lr");
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

}  // namespace fresco
