// Executor: the epoch loop over a compiled model. Per step it stages a batch into pinned buffer A or B
// (oneTBB gather), then launches TRANSFER, FIRST_LAYER_FWD, DEEP_FWD_BWD, FIRST_LAYER_BWD, OPTIMIZER and
// ACCUM_METRICS of the step's variant (train_last for the partial last batch; the lowres variants in the end
// stage of a progressive resolution, each batch resized while staged). Every handle was resolved at
// compile time; the loop does array reads and launches only. Metrics are read back once per pass. Tested by
// tests/e2e.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "fresco/core/compiler.h"
#include "fresco/core/data/augment.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/data/resize.h"
#include "fresco/ops.h"

namespace fresco {

class Runtime;

class Executor {
 public:
  Executor(const CompiledModel& m, Runtime& rt);
  // Copies samples idx[0..count) of `d` into staging buffer `ab` (labels, then NHWC bytes); with
  // `augment_epoch` >= 0 and an active augmentation, each image is augmented with that epoch's draws; for
  // a train variant `v` at a smaller input size (progressive resolution) each image is then resized to it.
  void stage(char ab, const data::Dataset& d, const uint32_t* idx, int64_t count, int64_t augment_epoch,
             Variant v);
  // The train variant of a step of `epoch` on a batch of `count` (the last of an epoch may be partial):
  // train_base / train_last in the progressive resolution's begin stage (or without one), train_lowres /
  // train_lowres_last in its end stage.
  Variant train_variant(uint32_t epoch, int64_t count) const;
  // Training-time augmentation for train_epoch (off by default); draws come from `seed`.
  void set_augmentation(const data::Augmentation& a, uint64_t seed) {
    aug_ = a;
    aug_seed_ = seed;
    const bool resizes =
        std::any_of(resize_.begin(), resize_.end(), [](const data::AreaResize& r) { return !r.identity(); });
    if (resizes && a.active())  // the augmented images at the data's size, before the resize
      resize_scratch_.resize(static_cast<size_t>(m_.batch_of[static_cast<int>(Variant::TRAIN_BASE)] *
                                                 m_.arch.input_sample.per_sample()));
  }
  // No progress lines from train_epoch (the ranks but 0 of a data-parallel job).
  void set_quiet(bool quiet) { quiet_ = quiet; }
  // One training step on the batch staged in `ab` at variant v. With a deferred update
  // (CompiledModel::update_deferred()) the step begins with the previous step's update, if one is pending,
  // and leaves its own pending: finish_updates() runs it.
  void train_step(Variant v, char ab);
  // The pending update of the last step, alone (nothing without a deferred update or after it has run).
  // train_epoch ends with it; a caller of train_step calls it before anything reads the weights.
  void finish_updates();
  // A pass over `d` in `order` (batch after batch, the last one partial), augmented as set for `epoch`: its
  // steps [first_step, end_step) (end_step -1: to the epoch's end), so an epoch may be trained in parts.
  // Ends with finish_updates().
  void train_epoch(const data::Dataset& d, const std::vector<uint32_t>& order, uint32_t epoch = 0,
                   int64_t first_step = 0, int64_t end_step = -1);
  // Forward + loss + metrics over the whole of `d`, in order.
  void evaluate(const data::Dataset& d);
  // UPDATE_BN_INF_PARAMS: what inference computes once from the trained state (batchnorm's folded scale and
  // shift); evaluate() runs it first.
  void prepare_inference();
  void clear_metrics();
  FrMetricAccumulators read_metrics(bool train);
  FrStepScalars read_scalars();
  void write_scalars(const FrStepScalars& s);

 private:
  static int ab_index(char ab) { return ab == 'A' ? 0 : 1; }
  const CompiledModel& m_;
  Runtime& rt_;
  uint64_t labels_offset_ = 0, data_offset_ = 0;  // inside a staging buffer
  data::Augmentation aug_;
  uint64_t aug_seed_ = 0;
  // Progressive resolution: per variant, the resize from the data's size to its input (identity: none),
  // and room for the augmented images of a batch before they are resized (allocated once).
  std::array<data::AreaResize, kVariantCount> resize_;
  std::vector<uint8_t> resize_scratch_;  // with an augmentation only
  bool quiet_ = false;
  // Per variant and buffer: capture indices (-1 = none), resolved once.
  int transfer_[kVariantCount][2];
  int step_[kVariantCount][2];
  int step_after_update_[kVariantCount][2];  // deferred update: the step that begins with the pending one
  int update_alone_ = -1;                    // deferred update: OPTIMIZER on the steps' stream
  bool update_pending_ = false;
  int infer_[kVariantCount][2];
  int copied_[2];    // event: TRANSFER from staging X finished (staging X may be rewritten)
  int consumed_[2];  // event: the step that read I_X finished (I_X may be overwritten)
};

}  // namespace fresco
