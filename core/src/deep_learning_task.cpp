// DeepLearningTask: builder, compile (data, compiler, arena, init, capture) and the training loop.
#include "fresco/core/deep_learning_task.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <tuple>

#include "data_parallel.h"
#include "fresco/core/error.h"
#include "fresco/core/executor.h"
#include "fresco/core/log.h"
#include "fresco/core/runtime.h"
#include "fresco/philox.h"
#include "fresco/update_rules.h"

namespace fresco {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

Normalization default_normalization(const std::string& kind) {
  if (kind == "fashion-mnist") return Normalization{{0.286f}, {0.353f}};
  if (kind == "mnist") return Normalization{{0.1307f}, {0.3081f}};
  if (kind == "cifar10") return Normalization{{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  if (kind == "cifar100") return Normalization{{0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}};
  throw Error(ErrorCode::kBadConfig, "no default normalisation for dataset kind '" + kind + "'");
}

DeepLearningTask::DeepLearningTask() = default;
DeepLearningTask::~DeepLearningTask() = default;

#define FRESCO_SETTER(sig, body)                         \
  DeepLearningTask& DeepLearningTask::sig {              \
    require(Phase::PLANNING, "DeepLearningTask::" #sig); \
    body;                                                \
    return *this;                                        \
  }
FRESCO_SETTER(model(BluePrint bp), bp_ = std::move(bp))
FRESCO_SETTER(data(DataSpec spec), data_spec_ = std::move(spec); have_data_ = false)
FRESCO_SETTER(data(data::Dataset train, data::Dataset test), train_ = std::move(train);
              test_ = std::move(test); have_data_ = true)
FRESCO_SETTER(normalize(Normalization n), norm_ = std::move(n); norm_set_ = true)
FRESCO_SETTER(batch_size(int64_t b), batch_ = b)
FRESCO_SETTER(val_batch_size(int64_t b), val_batch_ = b)
FRESCO_SETTER(epochs(int32_t e), epochs_ = e)
FRESCO_SETTER(loss(CrossEntropyLoss l), loss_ = l)
FRESCO_SETTER(optimizer(Optimizer o), opt_ = o)
FRESCO_SETTER(scheduler(Scheduler s), sched_ = std::move(s))
FRESCO_SETTER(device(std::string d), device_ = std::move(d))
FRESCO_SETTER(precision(DType p), options_.precision = p)
FRESCO_SETTER(early_update(bool on),
              options_.early_update = on ? CompileOptions::EarlyUpdate::ON : CompileOptions::EarlyUpdate::OFF)
FRESCO_SETTER(early_update_parts(int n), options_.early_update_parts = n)
FRESCO_SETTER(fuse_head(bool on), options_.fuse_head = on)
FRESCO_SETTER(defer_fc_weight_gradients(bool on, int64_t min_macs), options_.defer_fc_weight_gradients = on;
              options_.defer_fc_min_macs = min_macs)
FRESCO_SETTER(conv_join_lag(int64_t max_values), options_.conv_join_lag_max = max_values)
FRESCO_SETTER(fork_shortcuts(bool on), options_.fork_shortcuts = on)
FRESCO_SETTER(fused_weight_cast(bool on), options_.fused_weight_cast = on)
FRESCO_SETTER(update_from_grads16(CompileOptions::Grads16Update mode), options_.update_from_grads16 = mode)
FRESCO_SETTER(deferred_update(CompileOptions::DeferredUpdate mode), options_.deferred_update = mode)
FRESCO_SETTER(speculative_update(CompileOptions::SpeculativeUpdate mode), options_.speculative_update = mode)
FRESCO_SETTER(speculative_backups(CompileOptions::SpeculativeBackups mode),
              options_.speculative_backups = mode)
FRESCO_SETTER(freeze_first_layer(bool on), options_.freeze_first_layer = on)
FRESCO_SETTER(ema(double decay, int32_t every), (options_.ema_decay = decay, options_.ema_every = every))
FRESCO_SETTER(fuse_joins(bool on), options_.fuse_joins = on)
FRESCO_SETTER(conv_stats(CompileOptions::ConvStats mode), options_.conv_stats = mode)
FRESCO_SETTER(grad_sums(CompileOptions::GradSums mode), options_.grad_sums = mode)
FRESCO_SETTER(conv_prologue(CompileOptions::ConvPrologue mode), options_.conv_prologue = mode)
FRESCO_SETTER(join_epilogue(CompileOptions::JoinEpilogue mode), options_.join_epilogue = mode)
FRESCO_SETTER(join_prologue(CompileOptions::JoinPrologue mode), options_.join_prologue = mode)
FRESCO_SETTER(compact_shortcut_grads(CompileOptions::CompactShortcutGrads mode),
              options_.compact_shortcut_grads = mode)
FRESCO_SETTER(subsampled_shortcuts(CompileOptions::SubsampledShortcuts mode),
              options_.subsampled_shortcuts = mode)
FRESCO_SETTER(augment(data::Augmentation a), augment_ = a)
FRESCO_SETTER(seed(uint64_t s), seed_ = s)
FRESCO_SETTER(shuffle(bool on), shuffle_ = on)
FRESCO_SETTER(progressive_resolution(ProgressiveResolution p), progressive_ = p)
FRESCO_SETTER(ranks(int32_t n), ranks_ = n)
FRESCO_SETTER(on_epoch(std::function<void(const EpochReport&)> cb), on_epoch_ = std::move(cb))
#undef FRESCO_SETTER

void DeepLearningTask::plan() {
  require(Phase::PLANNING, "DeepLearningTask::plan");
  FRESCO_CHECK(!bp_.empty(), ErrorCode::kBadConfig, "no model: call model(seq(...)) before compile()");
  FRESCO_CHECK(epochs_ >= 1, ErrorCode::kBadConfig, "epochs must be >= 1, found " + std::to_string(epochs_));
  FRESCO_CHECK(batch_ >= 1 && batch_ <= (1 << 20), ErrorCode::kBadConfig,
               "batch_size must be in [1, 1048576], found " + std::to_string(batch_));
  if (!have_data_) {
    FRESCO_CHECK(!data_spec_.kind.empty(), ErrorCode::kBadConfig, "no data: call data(FashionMnist(dir))");
    std::tie(train_, test_) = data::load_train_test(data_spec_.kind, data_spec_.path);
    if (!norm_set_) norm_ = default_normalization(data_spec_.kind);
    have_data_ = true;
  }
  data::validate(train_, "training set");
  data::validate(test_, "test set");
  FRESCO_CHECK(train_.n > 0, ErrorCode::kBadConfig, "training set '" + train_.name + "' is empty");
  FRESCO_CHECK(test_.n == 0 || test_.num_classes == train_.num_classes, ErrorCode::kBadData,
               "test set '" + test_.name + "' has " + std::to_string(test_.num_classes) +
                   " classes, training set '" + train_.name + "' " + std::to_string(train_.num_classes));
  FRESCO_CHECK(
      val_batch_ >= 0 && val_batch_ <= (1 << 20), ErrorCode::kBadConfig,
      "val_batch_size must be 0 (the batch size) or in [1, 1048576], found " + std::to_string(val_batch_));
  FRESCO_CHECK(test_.n == 0 || (test_.h == train_.h && test_.w == train_.w && test_.c == train_.c),
               ErrorCode::kBadData,
               "test images of '" + test_.name + "' are " + std::to_string(test_.w) + "x" +
                   std::to_string(test_.h) + "x" + std::to_string(test_.c) + ", training images of '" +
                   train_.name + "' " + std::to_string(train_.w) + "x" + std::to_string(train_.h) + "x" +
                   std::to_string(train_.c));
  if (!norm_set_ && norm_.mean.size() != static_cast<size_t>(train_.c)) {
    norm_.mean.assign(static_cast<size_t>(train_.c), 0.0f);
    norm_.std.assign(static_cast<size_t>(train_.c), 1.0f);
  }
  device_ = resolve_device(device_);
  FRESCO_CHECK(options_.precision == DType::F32 || options_.precision == DType::BF16 ||
                   options_.precision == DType::F16,
               ErrorCode::kBadConfig,
               std::string("precision must be fp32, bf16 or fp16, found ") + dtype_name(options_.precision));

  FRESCO_CHECK(augment_.crop_pad >= 0 && augment_.crop_pad < std::min(train_.h, train_.w),
               ErrorCode::kBadConfig,
               "augment crop_pad must be in [0, " + std::to_string(std::min(train_.h, train_.w)) +
                   "), found " + std::to_string(augment_.crop_pad));
  FRESCO_CHECK(augment_.cutout >= 0 && augment_.cutout <= std::min(train_.h, train_.w), ErrorCode::kBadConfig,
               "augment cutout must be in [0, " + std::to_string(std::min(train_.h, train_.w)) + "], found " +
                   std::to_string(augment_.cutout));
  for (size_t k = 0; k < augment_.cutout_fill.size() && k < norm_.mean.size();
       ++k)  // about 0 once normalised
    augment_.cutout_fill[k] =
        static_cast<uint8_t>(std::lround(std::clamp(norm_.mean[k], 0.0f, 1.0f) * 255.0f));

  if (batch_ > train_.n && train_.n > 0)  // PyTorch's DataLoader does the same, silently
    log().warn("batch size {} is larger than the {} training samples: each epoch is one batch of {}", batch_,
               train_.n, train_.n);

  FRESCO_CHECK(ranks_ >= 1 && ranks_ <= 4096 && batch_ % ranks_ == 0, ErrorCode::kBadConfig,
               "ranks " + std::to_string(ranks_) + ": must be 1 to 4096 and divide batch_size " +
                   std::to_string(batch_) + " (each rank trains batch_size / ranks samples a step)");
  CompileOptions o = options_;  // the builder's compile settings; the rest from the data and the job
  o.input_sample = Shape{1, train_.h, train_.w, train_.c};
  o.num_classes = train_.num_classes;
  // Each rank's share: batch_size / ranks a step over its part of the epoch (rank_order).
  o.batch = batch_ / ranks_;
  o.train_samples = (train_.n + ranks_ - 1) / ranks_;
  o.val_batch = val_batch_ > 0 ? val_batch_ : o.batch;
  o.val_samples = test_.n;
  o.steps_per_epoch = (o.train_samples + o.batch - 1) / o.batch;
  o.total_steps = o.steps_per_epoch * epochs_;
  o.ranks = ranks_;
  o.normalize = norm_;
  o.loss = loss_;
  opt_.validate();  // as configured, before a one-cycle schedule sets its momentum (as PyTorch's SGD checks)
  o.optimizer = opt_;
  // the per-epoch kinds and one-cycle run as the table of their steps' values (train_config.h)
  sched_run_ = sched_.runs_as_table() ? sched_.as_table(opt_.lr, o.steps_per_epoch, epochs_) : sched_;
  if (!sched_run_.momenta.empty()) {  // as PyTorch's OneCycleLR sets it: max_momentum, then the table's
    if (o.optimizer.type == Optimizer::Type::SGD || o.optimizer.type == Optimizer::Type::LARS) {
      // SGD keeps its buffer only where the momentum is not 0 (PyTorch skips the buffer's update at a step of
      // momentum 0); fresco's buffer is there for every step or none, so a cycle touching 0 is refused
      FRESCO_CHECK(sched_.base_momentum > 0.0 && sched_.max_momentum > 0.0, ErrorCode::kBadConfig,
                   "scheduler: one_cycle cycles SGD's momentum between base_momentum " +
                       std::to_string(sched_.base_momentum) + " and max_momentum " +
                       std::to_string(sched_.max_momentum) +
                       "; both must be above 0 (or set cycle_momentum false)");
      o.optimizer.momentum = static_cast<float>(sched_.max_momentum);
    } else {
      o.optimizer.beta1 = static_cast<float>(sched_.max_momentum);
    }
  }
  o.scheduler = sched_run_;
  o.seed = seed_;
  progressive_.validate(train_.h, train_.w, epochs_);
  o.progressive = progressive_;
  Compiler compiler;
  model_ = std::make_unique<CompiledModel>(compiler.compile(bp_, o));
  advance(Phase::MEMORY_LOCKED);
}

void DeepLearningTask::compile() {
  const auto t0 = Clock::now();
  if (phase() == Phase::PLANNING) plan();
  require(Phase::MEMORY_LOCKED, "DeepLearningTask::compile");
  // Checked here, not in plan(): a low-precision job can still be planned and inspected on any machine.
  FRESCO_CHECK(
      options_.precision == DType::F32 || device_ != "cpu", ErrorCode::kBadConfig,
      std::string("precision ") + dtype_name(options_.precision) +
          " runs on a GPU only: the cpu backend computes in fp32 (use device cuda or precision fp32)");
  if (ranks_ > 1 && rank_ == 0) {
    compile_ranks();  // every rank's compile_this_rank, each on its thread
  } else if (rank_ == 0) {
    compile_this_rank();
  } else {
    throw Error(ErrorCode::kInternal, "compile() on a replica: its rank 0 compiles it");
  }
  log().info(
      "compiled {} on {}{}: {} parameters, device memory {:.2f} MiB (arena {:.2f} + kernel workspaces "
      "{:.2f}), "
      "{} tensors; slots {} / unique {} / reused {}; {:.2f} s",
      bp_.describe(), device_, ranks_ > 1 ? " x " + std::to_string(ranks_) + " ranks" : std::string(),
      model_->arch.parameter_count, runtime_->device_bytes() / 1048576.0,
      (runtime_->device_bytes() - runtime_->workspace_bytes()) / 1048576.0,
      runtime_->workspace_bytes() / 1048576.0, model_->base_plan().size(), model_->atlas.stats().slots,
      model_->atlas.stats().unique, model_->atlas.stats().reused, seconds_since(t0));
}

void DeepLearningTask::compile_this_rank() {
  // cuda: device r for rank r; a cpu context each
  const int32_t device_index = device_ == "cpu" ? 0 : rank_;
  runtime_ = std::make_unique<Runtime>(device_, device_index);
  const MemoryPlan& plan = model_->base_plan();
  runtime_->allocate(plan, plan.region_range(Region::I_A_LABELS, Region::I_A_DATA).bytes);
  if (group_) runtime_->attach_comm(group_->api, group_->group, rank_, device_index);
  const CaptureStats cs = runtime_->pre_capture(model_->atlas);
  exec_ = std::make_unique<Executor>(*model_, *runtime_);
  exec_->set_augmentation(augment_, seed_);
  exec_->set_quiet(rank_ != 0);
  init_parameters();
  for (const auto& [e, w] : ema_pairs()) {  // the average starts as the initial weights
    const uint64_t bytes = static_cast<uint64_t>(plan.tensor(w).shape.numel()) * sizeof(float);
    std::vector<float> v(bytes / sizeof(float));
    runtime_->download(plan, w, v.data(), bytes);
    runtime_->upload(plan, e, v.data(), bytes);
  }
  cast_weights();
  FrStepScalars s{};
  s.lr = fr_schedule_lr(&model_->schedule, 0, sched_run_.table.empty() ? nullptr : sched_run_.table.data());
  s.loss_scale = options_.precision == DType::F16 ? 65536.0f : 1.0f;  // GradScaler's initial scale for fp16
  s.seed_lo = static_cast<uint32_t>(seed_);
  s.seed_hi = static_cast<uint32_t>(seed_ >> 32);
  exec_->write_scalars(s);
  if (sched_run_.type == Scheduler::Type::TABLE)
    runtime_->upload(plan, model_->t.lr_table, sched_run_.table.data(),
                     sched_run_.table.size() * sizeof(float));
  if (!sched_run_.momenta.empty())
    runtime_->upload(plan, model_->t.momentum_table, sched_run_.momenta.data(),
                     sched_run_.momenta.size() * sizeof(float));
  advance(Phase::COMPILED);
  log().debug("rank {}: {} kernel calls prepared", rank_, cs.calls);
}

// PyTorch's default Linear init (kaiming_uniform with a = sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
// the weight and the bias, drawn from Philox(seed, INIT, tensor, index).
void DeepLearningTask::init_parameters() {
  uint32_t sub = 0;
  const MemoryPlan& plan = model_->base_plan();
  auto fill = [&](TensorId id, float value) {
    std::vector<float> v(static_cast<size_t>(plan.tensor(id).shape.numel()), value);
    runtime_->upload(plan, id, v.data(), v.size() * sizeof(float));
  };
  for (const auto& l : model_->arch.layers) {
    if (l.kind == LayerKind::BN) {  // PyTorch: gamma 1, beta 0, running mean 0, running var 1
      fill(l.weight, 1.0f);
      fill(l.bias, 0.0f);
      fill(l.running_mean, 0.0f);
      fill(l.running_var, 1.0f);
      continue;
    }
    if (l.kind != LayerKind::FC && l.kind != LayerKind::CONV) continue;
    const int64_t fan_in = l.kind == LayerKind::FC ? l.in_sample.per_sample()
                                                   : l.spec.k * l.spec.k * (l.in_sample.c / l.spec.groups);
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (TensorId id : {l.weight, l.bias}) {
      ++sub;
      if (id == kNoTensor) continue;
      const int64_t n = plan.tensor(id).shape.numel();
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; i += 4) {
        const FrPhilox4 r = fr_draw4(seed_, FR_RNG_INIT, sub, 0, static_cast<uint64_t>(i / 4));
        for (int j = 0; j < 4 && i + j < n; ++j)
          v[static_cast<size_t>(i + j)] = static_cast<float>((2.0 * fr_u01(r.v[j]) - 1.0) * bound);
      }
      runtime_->upload(plan, id, v.data(), v.size() * sizeof(float));
    }
  }
}

int64_t DeepLearningTask::steps_per_epoch() const {
  FRESCO_CHECK(model_, ErrorCode::kUsage, "DeepLearningTask::steps_per_epoch: plan() or compile() first");
  return model_->options.steps_per_epoch;
}

void DeepLearningTask::require_epochs_left(const char* call) const {
  const std::string api = std::string("DeepLearningTask::") + call;
  require(Phase::COMPILED, api.c_str());
  require_ranks_usable(call);
  // The compiled job's schedule covers its epochs once: another epoch would train at the schedule's last lr
  // and repeat epoch 0's shuffle.
  FRESCO_CHECK(epochs_done_ < epochs_, ErrorCode::kUsage,
               api + ": all " + std::to_string(epochs_) +
                   " epochs of this job have been run; compile a new task to train again");
}

TrainingResult DeepLearningTask::run(int32_t epochs) {
  require_epochs_left("run");
  FRESCO_CHECK(
      epochs >= 0, ErrorCode::kUsage,
      "DeepLearningTask::run: epochs must be 0 (all that are left) or more, found " + std::to_string(epochs));
  const int32_t end = epochs == 0 || epochs >= epochs_ - epochs_done_ ? epochs_ : epochs_done_ + epochs;
  return train_every_rank(end, -1);
}

TrainingResult DeepLearningTask::run_steps(int64_t steps) {
  require_epochs_left("run_steps");
  FRESCO_CHECK(steps >= 0, ErrorCode::kUsage,
               "DeepLearningTask::run_steps: steps must be 0 (all that are left) or more, found " +
                   std::to_string(steps));
  return train_every_rank(epochs_, steps == 0 ? -1 : steps);
}

TrainingResult DeepLearningTask::train_every_rank(int32_t end, int64_t budget) {
  if (replicas_.empty()) return train_until(end, budget);
  TrainingResult result;  // rank 0's: the others report nothing
  on_every_rank([&](DeepLearningTask& t) {
    TrainingResult r = t.train_until(end, budget);
    if (&t == this) result = std::move(r);
  });
  return result;
}

TrainingResult DeepLearningTask::train_until(int32_t end, int64_t budget) {
  TrainingResult result;
  const auto t_all = Clock::now();
  const int64_t spe = model_->options.steps_per_epoch, b = batch_;
  std::vector<uint32_t> order(static_cast<size_t>(train_.n));
  for (int32_t e = epochs_done_; e < end && budget != 0; ++e) {
    const auto t0 = Clock::now();
    if (shuffle_) {
      order = data::shuffled_indices(static_cast<uint32_t>(train_.n), seed_, static_cast<uint32_t>(e));
    } else {
      order.resize(static_cast<size_t>(train_.n));
      std::iota(order.begin(), order.end(), 0u);
    }
    const int64_t first = epoch_steps_done_;
    const int64_t last = budget < 0 || budget >= spe - first ? spe : first + budget;  // no overflow
    if (ranks_ > 1) order = rank_order(order);                                        // this rank's part
    const int32_t stage = e < progressive_.begin_epochs ? 0 : 1;
    if (progressive_.enabled() && rank_ == 0 && logged_stage_ != stage) {  // once a stage (and after a load)
      logged_stage_ = stage;
      const Shape s = model_->sample_of[static_cast<int>(exec_->train_variant(
          static_cast<uint32_t>(e), model_->batch_of[static_cast<int>(Variant::TRAIN_BASE)]))];
      log().info("epoch {}: training at {}x{} (progressive resolution, {} stage; evaluation at {}x{})", e + 1,
                 s.w, s.h, e < progressive_.begin_epochs ? "begin" : "end", train_.w, train_.h);
    }
    if (first == 0) exec_->clear_metrics();  // else the epoch's metrics so far (a checkpoint restores them)
    exec_->train_epoch(train_, order, static_cast<uint32_t>(e), first, last);
    runtime_->synchronize();
    steps_outside_run_ = false;
    if (budget > 0) budget -= last - first;
    if (last < spe) {  // stopped within the epoch: its report comes when it is finished
      epoch_steps_done_ = last;
      break;
    }
    epoch_steps_done_ = 0;
    FrMetricAccumulators tr = exec_->read_metrics(true);
    if (group_) {  // several ranks: every rank's metrics in, then rank 0 reports before any rank goes on
      group_->epoch_metrics[static_cast<size_t>(rank_)] = tr;
      group_->meet();
      if (rank_ != 0) {
        group_->meet();  // rank 0's report, evaluation and callback are done
        epochs_done_ = e + 1;
        continue;
      }
      tr = FrMetricAccumulators{};
      for (const FrMetricAccumulators& m : group_->epoch_metrics) add_metrics(tr, m);
    }
    EpochReport r;
    r.epoch = e + 1;
    r.train_seconds = seconds_since(t0);
    r.train_loss = tr.samples > 0 ? tr.loss_sum / tr.samples : 0.0;
    r.train_acc = tr.samples > 0 ? tr.correct / tr.samples : 0.0;
    // the samples of this call's steps (all of the epoch's, unless it was started before)
    r.samples_per_s =
        static_cast<double>(train_.n - std::min<int64_t>(train_.n, first * b)) / r.train_seconds;
    // the lr the epoch's last step used (the device's scalars hold the next step's), by the same rule
    const FrStepScalars sc = exec_->read_scalars();
    r.lr = sc.step > 0 ? fr_schedule_lr(&model_->schedule, sc.step - 1,
                                        sched_run_.table.empty() ? nullptr : sched_run_.table.data())
                       : sc.lr;
    if (test_.n > 0) {
      const EvalResult ev = evaluate();
      r.test_loss = ev.loss;
      r.test_acc = ev.accuracy;
      if (options_.ema_decay > 0.0) {
        const EvalResult ea = evaluate(true);
        r.ema_test_loss = ea.loss;
        r.ema_test_acc = ea.accuracy;
      }
    }
    r.seconds = seconds_since(t0);
    epochs_done_ = e + 1;
    result.epochs.push_back(r);
    if (on_epoch_) on_epoch_(r);
    if (group_) group_->meet();  // the other ranks go on
  }
  result.final_test_acc = result.epochs.empty() ? NAN : result.epochs.back().test_acc;
  result.seconds = seconds_since(t_all);
  return result;
}

void DeepLearningTask::stage_batch(const uint32_t* idx, int64_t count) {
  require(Phase::COMPILED, "DeepLearningTask::stage_batch");
  require_one_rank("stage_batch");
  FRESCO_CHECK(idx, ErrorCode::kUsage, "stage_batch: no index array");
  FRESCO_CHECK(count == model_->batch_of[static_cast<int>(Variant::TRAIN_BASE)], ErrorCode::kUsage,
               "stage_batch: a batch of " + std::to_string(count) + " is not train_base's");
  for (int64_t i = 0; i < count; ++i)
    FRESCO_CHECK(idx[i] < train_.n, ErrorCode::kUsage, "stage_batch: sample index out of range");
  exec_->stage('A', train_, idx, count, -1, Variant::TRAIN_BASE);
  runtime_->launch(model_->atlas, Variant::TRAIN_BASE, GraphId::TRANSFER_A);
  runtime_->synchronize();
}

float DeepLearningTask::train_step(const uint32_t* idx, int64_t count) {
  require(Phase::COMPILED, "DeepLearningTask::train_step");
  require_one_rank("train_step");
  steps_outside_run_ = true;
  FRESCO_CHECK(count >= 1 && idx, ErrorCode::kUsage,
               "train_step: needs at least one sample index, found " + std::to_string(count) +
                   (idx ? "" : " and no index array"));
  FRESCO_CHECK(count == model_->batch_of[static_cast<int>(Variant::TRAIN_BASE)] ||
                   count == model_->batch_of[static_cast<int>(Variant::TRAIN_LAST)],
               ErrorCode::kUsage,
               "train_step: a batch of " + std::to_string(count) + " matches neither train_base (" +
                   std::to_string(model_->batch_of[0]) + ") nor train_last (" +
                   std::to_string(model_->batch_of[1]) + ")");
  // the stage of the next epoch (progressive resolution), as run() would train it
  const Variant v = exec_->train_variant(static_cast<uint32_t>(epochs_done_), count);
  for (int64_t i = 0; i < count; ++i)
    FRESCO_CHECK(idx[i] < train_.n, ErrorCode::kUsage, "train_step: sample index out of range");
  exec_->stage('A', train_, idx, count, -1, v);
  exec_->train_step(v, 'A');
  exec_->finish_updates();  // the caller may read the weights next
  FrBatchResults b{};
  runtime_->download(model_->base_plan(), model_->t.batch_train, &b, sizeof(b));
  return b.loss;
}

std::vector<std::pair<TensorId, TensorId>> DeepLearningTask::ema_pairs() const {
  std::vector<std::pair<TensorId, TensorId>> out;
  for (const DTensor& t : model_->base_plan().tensors())
    if (region_family(t.region) == Family::E) out.emplace_back(t.id, t.param_of);
  return out;
}

void DeepLearningTask::swap_ema_weights() {
  const MemoryPlan& plan = model_->base_plan();
  // every value read before any is written: a failure while reading leaves both families as they were
  std::vector<std::pair<std::vector<float>, std::vector<float>>> held;
  for (const auto& [e, w] : ema_pairs()) {
    const uint64_t bytes = static_cast<uint64_t>(plan.tensor(w).shape.numel()) * sizeof(float);
    held.emplace_back(std::vector<float>(bytes / sizeof(float)), std::vector<float>(bytes / sizeof(float)));
    runtime_->download(plan, w, held.back().first.data(), bytes);
    runtime_->download(plan, e, held.back().second.data(), bytes);
  }
  size_t k = 0;
  for (const auto& [e, w] : ema_pairs()) {
    const auto& [wv, ev] = held[k++];
    runtime_->upload(plan, w, ev.data(), ev.size() * sizeof(float));
    runtime_->upload(plan, e, wv.data(), wv.size() * sizeof(float));
  }
  cast_weights();
}

EvalResult DeepLearningTask::evaluate(bool ema) {
  require(Phase::COMPILED, "DeepLearningTask::evaluate");
  FRESCO_CHECK(!group_ || !group_->aborted, ErrorCode::kUsage,
               "evaluate: the ranks stopped after an error, possibly within a step (compile a new task): " +
                   group_->abort_reason);
  FRESCO_CHECK(test_.n > 0, ErrorCode::kUsage, "evaluate: no test set");
  if (ema) {  // the averaged weights in place of the trained ones for this evaluation
    FRESCO_CHECK(options_.ema_decay > 0.0, ErrorCode::kUsage,
                 "evaluate(ema): the job has no EMA (ema(decay))");
    swap_ema_weights();
    EvalResult r;
    try {
      r = evaluate(false);
    } catch (...) {
      swap_ema_weights();
      throw;
    }
    swap_ema_weights();
    return r;
  }
  FrMetricAccumulators zero{};
  runtime_->upload(model_->base_plan(), model_->t.acc_val, &zero, sizeof(zero));
  exec_->evaluate(test_);
  const FrMetricAccumulators a = exec_->read_metrics(false);
  EvalResult r;
  r.samples = static_cast<int64_t>(a.samples);
  r.loss = a.samples > 0 ? a.loss_sum / a.samples : 0.0;
  r.accuracy = a.samples > 0 ? a.correct / a.samples : 0.0;
  return r;
}

std::vector<float> DeepLearningTask::test_logits(int64_t count) {
  require(Phase::COMPILED, "DeepLearningTask::test_logits");
  require_one_rank("test_logits");
  const int64_t vb = model_->batch_of[static_cast<int>(Variant::VAL_BASE)];
  FRESCO_CHECK(count > 0 && count <= vb && count <= test_.n, ErrorCode::kUsage,
               "test_logits: count " + std::to_string(count) + " must be in [1, val batch " +
                   std::to_string(vb) + "]");
  std::vector<uint32_t> idx(static_cast<size_t>(vb));
  std::iota(idx.begin(), idx.end(), 0u);
  exec_->stage('A', test_, idx.data(), vb, -1, Variant::VAL_BASE);
  exec_->prepare_inference();
  runtime_->launch(model_->atlas, Variant::VAL_BASE, GraphId::TRANSFER_A);
  runtime_->launch(model_->atlas, Variant::VAL_BASE, GraphId::INF_MAIN_A);
  std::vector<float> out(static_cast<size_t>(count * model_->arch.num_classes));
  runtime_->download(model_->base_plan(), model_->t.logits, out.data(), out.size() * sizeof(float));
  return out;
}

int32_t DeepLearningTask::layer_index(const std::string& path) const {
  FRESCO_CHECK(model_, ErrorCode::kUsage, "layer_index() before plan()");
  for (const auto& l : model_->arch.layers)
    if (l.spec.path == path) return l.index;
  throw Error(ErrorCode::kUsage, "no layer with path '" + path + "' in " + bp_.describe());
}

TensorId DeepLearningTask::param_tensor(int32_t layer, const std::string& which) const {
  FRESCO_CHECK(model_ && layer >= 0 && static_cast<size_t>(layer) < model_->arch.layers.size(),
               ErrorCode::kUsage, "no layer " + std::to_string(layer));
  const auto& l = model_->arch.layers[static_cast<size_t>(layer)];
  const TensorId id = which == "weight"         ? l.weight
                      : which == "bias"         ? l.bias
                      : which == "running_mean" ? l.running_mean
                      : which == "running_var"  ? l.running_var
                                                : kNoTensor;
  FRESCO_CHECK(id != kNoTensor, ErrorCode::kUsage,
               "layer " + std::to_string(layer) + " (" + l.name + ") has no parameter '" + which + "'");
  return id;
}

namespace {
// Conv weights: PyTorch's [K, C, R, S] <-> fresco's [K, R, S, C] (C = input channels per group). `to_krsc`
// picks the direction; `krsc` is fresco's shape either way.
std::vector<float> permute_conv_weight(const std::vector<float>& v, const Shape& krsc, bool to_krsc) {
  const int64_t K = krsc.n, R = krsc.h, S = krsc.w, C = krsc.c;
  std::vector<float> out(v.size());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t t = 0; t < S; ++t) {
          const auto fr = static_cast<size_t>(((k * R + r) * S + t) * C + c);
          const auto pt = static_cast<size_t>(((k * C + c) * R + r) * S + t);
          if (to_krsc)
            out[fr] = v[pt];
          else
            out[pt] = v[fr];
        }
  return out;
}
}  // namespace

// Tensor `id` (layer's parameter `which`, or its EMA) in PyTorch's layout.
std::vector<float> DeepLearningTask::read_param_values(int32_t layer, const std::string& which, TensorId id) {
  const DTensor& t = model_->base_plan().tensor(id);
  std::vector<float> v(static_cast<size_t>(t.shape.numel()));
  runtime_->download(model_->base_plan(), id, v.data(), v.size() * sizeof(float));
  if (model_->arch.layers[static_cast<size_t>(layer)].kind == LayerKind::CONV && which == "weight")
    return permute_conv_weight(v, t.shape, false);
  return v;
}

std::vector<float> DeepLearningTask::read_param(int32_t layer, const std::string& which) {
  require(Phase::COMPILED, "DeepLearningTask::read_param");
  return read_param_values(layer, which, param_tensor(layer, which));
}

std::vector<float> DeepLearningTask::read_ema_param(int32_t layer, const std::string& which) {
  require(Phase::COMPILED, "DeepLearningTask::read_ema_param");
  FRESCO_CHECK(options_.ema_decay > 0.0, ErrorCode::kUsage,
               "read_ema_param: the job has no EMA (ema(decay))");
  const TensorId w = param_tensor(layer, which);
  for (const auto& [e, of] : ema_pairs())
    if (of == w) return read_param_values(layer, which, e);
  throw Error(ErrorCode::kInternal, "read_ema_param: no average planned for layer " + std::to_string(layer));
}

void DeepLearningTask::write_param(int32_t layer, const std::string& which,
                                   const std::vector<float>& values) {
  require(Phase::COMPILED, "DeepLearningTask::write_param");
  require_ranks_usable("write_param", false);  // also from an on_epoch callback: the others are waiting
  on_all_ranks_or_stop("write_param", [&](DeepLearningTask& t) { t.write_param_here(layer, which, values); });
}

void DeepLearningTask::write_param_here(int32_t layer, const std::string& which,
                                        const std::vector<float>& values) {
  const TensorId id = param_tensor(layer, which);
  const int64_t n = model_->base_plan().tensor(id).shape.numel();
  FRESCO_CHECK(static_cast<int64_t>(values.size()) == n, ErrorCode::kBadData,
               "write_param layer " + std::to_string(layer) + " " + which + ": expected " +
                   std::to_string(n) + " values, found " + std::to_string(values.size()));
  std::vector<float> stored = values;
  if (model_->arch.layers[static_cast<size_t>(layer)].kind == LayerKind::CONV && which == "weight")
    stored = permute_conv_weight(values, model_->base_plan().tensor(id).shape, true);
  runtime_->upload(model_->base_plan(), id, stored.data(), stored.size() * sizeof(float));
  // before the first step the EMA's average is the weights themselves: it follows what is written
  if (options_.ema_decay > 0.0 && exec_->read_scalars().step == 0)
    for (const auto& [e, w] : ema_pairs())
      if (w == id) runtime_->upload(model_->base_plan(), e, stored.data(), stored.size() * sizeof(float));
  cast_weights();
}

void DeepLearningTask::cast_weights() {
  if (model_->atlas.slot(Variant::TRAIN_BASE, GraphId::WEIGHT_CAST).captured_idx < 0) return;
  runtime_->launch(model_->atlas, Variant::TRAIN_BASE, GraphId::WEIGHT_CAST);
  runtime_->synchronize();
}

std::vector<const DTensor*> DeepLearningTask::state_tensors() const {
  std::vector<const DTensor*> out;
  for (const DTensor& t : model_->base_plan().tensors()) {
    const Family f = region_family(t.region);
    if (f == Family::W || f == Family::G || f == Family::M || f == Family::V) out.push_back(&t);
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<float>>> DeepLearningTask::snapshot() {
  require(Phase::COMPILED, "DeepLearningTask::snapshot");
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const DTensor* t : state_tensors()) {
    std::vector<float> v(static_cast<size_t>(t->shape.numel()));
    runtime_->download(model_->base_plan(), t->id, v.data(), v.size() * sizeof(float));
    out.emplace_back(t->name, std::move(v));
  }
  return out;
}

void DeepLearningTask::restore(const std::vector<std::pair<std::string, std::vector<float>>>& state) {
  require(Phase::COMPILED, "DeepLearningTask::restore");
  require_ranks_usable("restore", false);
  on_all_ranks_or_stop("restore", [&](DeepLearningTask& t) { t.restore_here(state); });
}

void DeepLearningTask::restore_here(const std::vector<std::pair<std::string, std::vector<float>>>& state) {
  const std::vector<const DTensor*> targets = state_tensors();
  // Every name and size is checked before anything is written: a refused state leaves the job as it was.
  FRESCO_CHECK(state.size() == targets.size(), ErrorCode::kBadData,
               "restore: the state has " + std::to_string(state.size()) + " tensors, this job " +
                   std::to_string(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& [name, values] = state[i];
    FRESCO_CHECK(name == targets[i]->name, ErrorCode::kBadData,
                 "restore: expected tensor " + targets[i]->name + " at position " + std::to_string(i) +
                     ", found " + name);
    FRESCO_CHECK(static_cast<int64_t>(values.size()) == targets[i]->shape.numel(), ErrorCode::kBadData,
                 "restore " + name + ": expected " + std::to_string(targets[i]->shape.numel()) +
                     " values, found " + std::to_string(values.size()));
  }
  for (size_t i = 0; i < targets.size(); ++i)
    runtime_->upload(model_->base_plan(), targets[i]->id, state[i].second.data(),
                     state[i].second.size() * sizeof(float));
  cast_weights();
}

float DeepLearningTask::current_lr() {
  require(Phase::COMPILED, "DeepLearningTask::current_lr");
  return exec_->read_scalars().lr;
}

uint64_t DeepLearningTask::device_memory_bytes() const {
  FRESCO_CHECK(runtime_, ErrorCode::kUsage, "device_memory_bytes() before compile()");
  return runtime_->memory_in_use();
}

double DeepLearningTask::time_steps(int steps) {
  require(Phase::COMPILED, "DeepLearningTask::time_steps");
  require_one_rank("time_steps");
  const int64_t b = model_->batch_of[static_cast<int>(Variant::TRAIN_BASE)];
  std::vector<uint32_t> idx(static_cast<size_t>(b));
  std::iota(idx.begin(), idx.end(), 0u);
  exec_->stage('A', train_, idx.data(), b, -1, Variant::TRAIN_BASE);
  exec_->stage('B', train_, idx.data(), b, -1, Variant::TRAIN_BASE);
  runtime_->synchronize();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) exec_->train_step(Variant::TRAIN_BASE, s % 2 ? 'B' : 'A');
  exec_->finish_updates();  // the last step's update (deferred_update), timed with the steps
  runtime_->synchronize();
  return seconds_since(t0);
}

Runtime& DeepLearningTask::runtime() {
  require(Phase::COMPILED, "DeepLearningTask::runtime");
  return *runtime_;
}

const CompiledModel& DeepLearningTask::compiled() const {
  FRESCO_CHECK(model_, ErrorCode::kUsage, "compiled() before compile()");
  return *model_;
}

}  // namespace fresco
