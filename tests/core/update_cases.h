// The mixed-precision update cases of the plan tests (test_mixed_precision_plan.cpp's weight copies,
// test_grads16_update_plan.cpp): a precision, the early update and its parts, an optimizer, a frozen first
// layer, the weight copies and the deferred update, as CompileOptions for the small residual model.
#pragma once

#include <string>

#include "fresco/core/compiler.h"
#include "small_compile_options.h"

namespace fresco::test {

struct UpdateCase {
  DType precision;
  CompileOptions::EarlyUpdate early;
  int parts;
  int optimizer = 0;  // 0 SGD, 1 SGD with no_decay_1d, 2 AdamW (no_decay_1d)
  bool freeze = false;
  bool fused = true;  // CompileOptions::fused_weight_cast
  CompileOptions::DeferredUpdate deferred = CompileOptions::DeferredUpdate::AUTO;
};

inline std::string update_case_name(const UpdateCase& c) {
  return std::string(dtype_name(c.precision)) + " parts " + std::to_string(c.parts) +
         (c.early == CompileOptions::EarlyUpdate::OFF ? " early off" : "") + " optimizer " +
         std::to_string(c.optimizer) + (c.freeze ? " frozen" : "") + (c.fused ? "" : " casts") +
         (c.deferred == CompileOptions::DeferredUpdate::ON ? " deferred" : "");
}

inline CompileOptions update_case_options(const UpdateCase& c) {
  CompileOptions o = small_compile_options(8);
  o.precision = c.precision;
  o.early_update = c.early;
  o.early_update_parts = c.parts;
  if (c.optimizer == 1) o.optimizer.no_decay_1d = true;
  if (c.optimizer == 2) o.optimizer = AdamW().with_weight_decay(0.01f).with_no_decay_1d();
  o.freeze_first_layer = c.freeze;
  o.fused_weight_cast = c.fused;
  o.deferred_update = c.deferred;
  return o;
}

}  // namespace fresco::test
