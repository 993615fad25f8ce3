// CompileOptions for Compiler-only tests of small models: `hw` x `hw` x 1 inputs, 10 classes, batch 4, two
// training steps, SGD.
#pragma once

#include "fresco/core/compiler.h"

namespace fresco::test {

inline CompileOptions small_compile_options(int64_t hw) {
  CompileOptions o;
  o.input_sample = Shape{1, hw, hw, 1};
  o.num_classes = 10;
  o.batch = 4;
  o.train_samples = 8;
  o.val_samples = 4;
  o.steps_per_epoch = 2;
  o.total_steps = 2;
  o.normalize = Normalization{{0.5f}, {0.5f}};
  o.optimizer = SGD();
  return o;
}

// The same for `hw` x `hw` x 3 images (CIFAR-like), batch `batch` (two steps, a validation batch), SGD
// Nesterov.
inline CompileOptions rgb_compile_options(int64_t hw, int64_t batch) {
  CompileOptions o;
  o.input_sample = Shape{1, hw, hw, 3};
  o.num_classes = 10;
  o.batch = batch;
  o.train_samples = 2 * batch;
  o.val_samples = batch;
  o.steps_per_epoch = 2;
  o.total_steps = 2;
  o.normalize = Normalization{{0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
  o.optimizer = SGD(0.9f, true);
  return o;
}

}  // namespace fresco::test
