// CompileOptions for Compiler-only tests of small models: `hw` x `hw` x 1 inputs, 10 classes, batch 4, two
// training steps, SGD; and a small residual model for them.
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

// A stem, an identity block and a projection block whose main branch is one conv and bn (stride 2, a 1x1
// conv and a bn on the shortcut), for 8 x 8 inputs.
inline BluePrint small_residual_blueprint() {
  return seq({conv(8, 3, 1, 1), bn(), relu(),
              residual({conv(8, 3, 1, 1), bn(), relu(), conv(8, 3, 1, 1), bn()}), relu(),
              residual({conv(16, 3, 2, 1), bn()}, {conv(16, 1, 2, 0), bn()}), relu(), gap(), fc(10)});
}

}  // namespace fresco::test
