// Executor: staging, the per-step launch sequence, whole passes and metric read-back.
#include "fresco/core/executor.h"

#include <spdlog/spdlog.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <chrono>
#include <cstring>

#include "fresco/core/error.h"
#include "fresco/core/log.h"
#include "fresco/core/runtime.h"

namespace fresco {

Executor::Executor(const CompiledModel& m, Runtime& rt) : m_(m), rt_(rt) {
  const MemoryPlan& p = m.base_plan();
  const RegionSpan a = p.region_range(Region::I_A_LABELS, Region::I_A_DATA);
  labels_offset_ = p.region(Region::I_A_LABELS).offset - a.offset;
  data_offset_ = p.region(Region::I_A_DATA).offset - a.offset;
  const GraphAtlas& at = m.atlas;
  for (int x = 0; x < 2; ++x) {
    copied_[x] = rt.create_event();
    consumed_[x] = rt.create_event();
  }
  const Shape in = m.arch.input_sample;
  for (int v = 0; v < kVariantCount; ++v) {  // progressive resolution: the stages' resizes
    const Shape& s = m.sample_of[v];
    if (at.present(static_cast<Variant>(v)) && !(s == in))
      resize_[v] = data::AreaResize(in.h, in.w, s.h, s.w);
  }
  for (int v = 0; v < kVariantCount; ++v) {
    const auto var = static_cast<Variant>(v);
    for (int x = 0; x < 2; ++x) {
      transfer_[v][x] = step_[v][x] = step_after_update_[v][x] = infer_[v][x] = -1;
      if (!at.present(var)) continue;
      // A lowres variant at the base's size (no progressive resolution) runs the base's captures.
      const int same = v == static_cast<int>(Variant::TRAIN_LOWRES) ? static_cast<int>(Variant::TRAIN_BASE)
                       : v == static_cast<int>(Variant::TRAIN_LOWRES_LAST)
                           ? static_cast<int>(Variant::TRAIN_LAST)
                           : -1;
      if (same >= 0 && m.sample_of[v] == m.sample_of[same] && m.batch_of[v] == m.batch_of[same]) {
        transfer_[v][x] = transfer_[same][x];
        step_[v][x] = step_[same][x];
        step_after_update_[v][x] = step_after_update_[same][x];
        continue;
      }
      transfer_[v][x] = at.slot(var, x ? GraphId::TRANSFER_B : GraphId::TRANSFER_A).captured_idx;
      if (is_train(var)) {
        std::vector<GraphId> step = {x ? GraphId::FIRST_LAYER_FWD_B : GraphId::FIRST_LAYER_FWD_A,
                                     GraphId::DEEP_FWD_BWD,
                                     GraphId::ACCUM_METRICS,
                                     x ? GraphId::FIRST_LAYER_BWD_B : GraphId::FIRST_LAYER_BWD_A,
                                     GraphId::GRAD_CAST,
                                     GraphId::DEEP_COMM,
                                     GraphId::NAN_CHECK_AND_GRAD_SCALING};
        if (m.update_deferred()) {  // the update begins the next step (or runs alone: update_alone_)
          step.push_back(GraphId::STEP_END);
          std::vector<GraphId> after = step;
          after.insert(after.begin(), GraphId::OPTIMIZER);
          step_after_update_[v][x] = rt.fuse(at, var, after, kFusedStream);
        } else {
          step.push_back(GraphId::OPTIMIZER);
        }
        if (m.weight_cast_in_step) step.push_back(GraphId::WEIGHT_CAST);
        step_[v][x] = rt.fuse(at, var, step, kFusedStream);
      } else {
        infer_[v][x] = at.slot(var, x ? GraphId::INF_MAIN_B : GraphId::INF_MAIN_A).captured_idx;
      }
    }
  }
  if (m.update_deferred()) {  // the last pending update alone, ordered with the steps on their stream
    update_alone_ = rt.fuse(at, Variant::TRAIN_BASE, {GraphId::OPTIMIZER}, kFusedStream);
    FRESCO_CHECK(update_alone_ >= 0, ErrorCode::kInternal, "the deferred update has no nodes to capture");
  }
}

void Executor::stage(char ab, const data::Dataset& d, const uint32_t* idx, int64_t count,
                     int64_t augment_epoch, Variant v) {
  rt_.host_wait(copied_[ab_index(ab)]);  // the previous transfer from this buffer has read it
  uint8_t* buf = rt_.staging(ab);
  const int64_t sb = d.sample_bytes();
  const data::AreaResize& rs = resize_[static_cast<int>(v)];
  const bool resize = is_train(v) && !rs.identity();
  const int64_t ob = resize ? rs.out_h() * rs.out_w() * d.c : sb;  // bytes per staged sample
  FRESCO_CHECK(buf && data_offset_ + static_cast<uint64_t>(count * ob) <= rt_.staging_bytes(),
               ErrorCode::kInternal,
               "stage: batch of " + std::to_string(count) + " does not fit the staging buffer");
  auto* labels = reinterpret_cast<int32_t*>(buf + labels_offset_);
  uint8_t* data = buf + data_offset_;
  const bool augment = augment_epoch >= 0 && aug_.active();
  FRESCO_CHECK(!resize || (d.h == m_.arch.input_sample.h && d.w == m_.arch.input_sample.w &&
                           (!augment || count * sb <= static_cast<int64_t>(resize_scratch_.size()))),
               ErrorCode::kInternal, "stage: the resize was planned for another image or batch size");
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, count, 32),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i != r.end(); ++i) {
          const uint32_t s = idx[i];
          labels[i] = d.labels[s];
          const uint8_t* src = d.images.data() + static_cast<int64_t>(s) * sb;
          // augmented at the data's size: into the scratch when it is resized after
          uint8_t* dst = resize && augment ? resize_scratch_.data() + i * sb : data + i * sb;
          if (augment)
            data::augment_image(src, dst, d.h, d.w, d.c,
                                data::augment_draw(aug_, aug_seed_, static_cast<uint32_t>(augment_epoch), s));
          else if (!resize)
            std::memcpy(dst, src, static_cast<size_t>(sb));
          if (resize) rs.apply(augment ? dst : src, data + i * ob, d.c);
        }
      },
      tbb::static_partitioner());
}

Variant Executor::train_variant(uint32_t epoch, int64_t count) const {
  const ProgressiveResolution& pr = m_.options.progressive;
  const bool end = pr.enabled() && epoch >= static_cast<uint32_t>(pr.begin_epochs);
  const bool full = count == m_.batch_of[static_cast<int>(Variant::TRAIN_BASE)];
  const Variant v = end ? (full ? Variant::TRAIN_LOWRES : Variant::TRAIN_LOWRES_LAST)
                        : (full ? Variant::TRAIN_BASE : Variant::TRAIN_LAST);
  FRESCO_CHECK(m_.batch_of[static_cast<int>(v)] == count, ErrorCode::kInternal,
               "train_variant: no compiled variant for a batch of " + std::to_string(count));
  return v;
}

void Executor::train_step(Variant v, char ab) {
  const int x = ab_index(ab), vi = static_cast<int>(v);
  FRESCO_CHECK(step_[vi][x] >= 0 && transfer_[vi][x] >= 0, ErrorCode::kInternal,
               std::string("train_step: variant ") + variant_name(v) + " has no captured step");
  rt_.wait(StreamRole::TRANS, consumed_[x]);
  rt_.launch_unordered(transfer_[vi][x]);
  rt_.record(copied_[x], StreamRole::TRANS);
  rt_.wait(StreamRole::COMP_1, copied_[x]);
  rt_.launch_unordered(update_pending_ ? step_after_update_[vi][x] : step_[vi][x]);
  rt_.record(consumed_[x], StreamRole::COMP_1);
  update_pending_ = m_.update_deferred();
}

void Executor::finish_updates() {
  if (!update_pending_) return;
  rt_.launch_unordered(update_alone_);  // on the steps' stream: after the last step, before what follows
  update_pending_ = false;
}

void Executor::train_epoch(const data::Dataset& d, const std::vector<uint32_t>& order, uint32_t epoch,
                           int64_t first_step, int64_t end_step) {
  const int64_t b = m_.batch_of[static_cast<int>(Variant::TRAIN_BASE)];
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t all = b > 0 ? (n + b - 1) / b : 0;
  const int64_t last = end_step == -1 ? all : std::min(end_step, all);
  FRESCO_CHECK(first_step >= 0 && end_step >= -1 && first_step <= last, ErrorCode::kInternal,
               "train_epoch: steps " + std::to_string(first_step) + " to " + std::to_string(last) +
                   " of an epoch of " + std::to_string(all));
  int64_t step = first_step;
  // A progress line every kProgressSeconds, for epochs long enough to look stuck otherwise (the CPU backend
  // on a large network); the host's clock, read once a step.
  constexpr double kProgressSeconds = 30.0;
  const auto t0 = std::chrono::steady_clock::now();
  double next_report = kProgressSeconds;
  const int64_t steps = all;
  try {
    for (int64_t start = first_step * b; step < last; start += b, ++step) {
      const int64_t count = std::min(b, n - start);
      const Variant v = train_variant(epoch, count);
      const char ab = step % 2 == 0 ? 'A' : 'B';
      stage(ab, d, order.data() + start, count, epoch, v);
      train_step(v, ab);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!quiet_ && t >= next_report && step + 1 < steps) {
        const double done = static_cast<double>(step + 1 - first_step);  // in this call
        log().info("epoch {}: step {}/{} ({:.0f}%), {:.0f} s, about {:.0f} s to the epoch's end", epoch + 1,
                   step + 1, steps, 100.0 * static_cast<double>(step + 1) / static_cast<double>(steps), t,
                   t * static_cast<double>(steps - step - 1) / done);
        next_report = t + kProgressSeconds;
      }
    }
  } catch (...) {
    // A step that throws leaves the update of the step before it pending: run it before the error leaves, so
    // the weights are those of the last step that ran (the step's error is the one that leaves).
    try {
      finish_updates();
    } catch (...) {
    }
    throw;
  }
  finish_updates();
}

void Executor::evaluate(const data::Dataset& d) {
  const int64_t b = m_.batch_of[static_cast<int>(Variant::VAL_BASE)];
  FRESCO_CHECK(b > 0, ErrorCode::kUsage, "evaluate: the job was compiled without a test set");
  std::vector<uint32_t> idx(static_cast<size_t>(b));
  prepare_inference();
  int64_t step = 0;
  for (int64_t start = 0; start < d.n; start += b, ++step) {
    const int64_t count = std::min(b, d.n - start);
    const Variant v = count == b ? Variant::VAL_BASE : Variant::VAL_LAST;
    for (int64_t i = 0; i < count; ++i) idx[static_cast<size_t>(i)] = static_cast<uint32_t>(start + i);
    const int x = static_cast<int>(step % 2), vi = static_cast<int>(v);
    stage(x ? 'B' : 'A', d, idx.data(), count, -1, v);
    rt_.wait(StreamRole::TRANS, consumed_[x]);
    rt_.launch_unordered(transfer_[vi][x]);
    rt_.record(copied_[x], StreamRole::TRANS);
    rt_.wait(StreamRole::COMP_1, copied_[x]);
    rt_.launch_unordered(infer_[vi][x]);
    rt_.record(consumed_[x], StreamRole::COMP_1);
  }
  rt_.synchronize();
}

void Executor::prepare_inference() {
  rt_.launch(m_.atlas, Variant::VAL_BASE, GraphId::UPDATE_BN_INF_PARAMS);  // nothing when the model has no bn
}

void Executor::clear_metrics() {
  rt_.launch(m_.atlas, Variant::TRAIN_BASE, GraphId::CLEAR_METRICS);
}

FrMetricAccumulators Executor::read_metrics(bool train) {
  FrMetricAccumulators a{};
  rt_.download(m_.base_plan(), train ? m_.t.acc_train : m_.t.acc_val, &a, sizeof(a));
  return a;
}

FrStepScalars Executor::read_scalars() {
  FrStepScalars s{};
  rt_.download(m_.base_plan(), m_.t.step_scalars, &s, sizeof(s));
  return s;
}

void Executor::write_scalars(const FrStepScalars& s) {
  rt_.upload(m_.base_plan(), m_.t.step_scalars, &s, sizeof(s));
}

}  // namespace fresco
