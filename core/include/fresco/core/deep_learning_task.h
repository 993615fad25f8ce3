// DeepLearningTask: the builder-style training job (model, data, loss, optimizer, scheduler, epochs, device),
// compiled ahead of time (plan, graphs, capture) and run by the Executor's epoch loop.
// Invariant: setters only in PLANNING; compile() moves to COMPILED; run() and the step-level calls need
// COMPILED. Tested by tests/e2e/test_mlp_fashion_mnist.cpp, test_determinism.cpp and the golden cases.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fresco/core/blueprint.h"
#include "fresco/core/compiler.h"
#include "fresco/core/data/augment.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/task.h"
#include "fresco/core/train_config.h"

namespace fresco {

class Runtime;
class Executor;
struct CommGroup;  // core/src/data_parallel.h
namespace checkpoint {
struct Contents;
}

struct DataSpec {
  std::string kind;  // "fashion-mnist", "mnist", "cifar10"
  std::string path;
};
inline DataSpec FashionMnist(std::string dir = "/usr/share/datasets/fashion-mnist") {
  return {"fashion-mnist", std::move(dir)};
}
inline DataSpec Mnist(std::string dir) {
  return {"mnist", std::move(dir)};
}
// CIFAR-10 as a JPEG image folder (a directory or a .tar.gz of {train,test}/<class>/*.jpg;
// data::load_jpeg_folder), e.g. ../shared/datasets/cifar10-jpeg.tar.gz.
inline DataSpec Cifar10(std::string path) {
  return {"cifar10", std::move(path)};
}
// The usual per-channel mean/std of a known dataset kind ("fashion-mnist", "mnist", "cifar10").
Normalization default_normalization(const std::string& kind);

struct EpochReport {
  int epoch = 0;  // 1-based
  double train_loss = 0, train_acc = 0;
  double test_loss = NAN, test_acc = NAN;          // NaN when the job has no test set (not a 0% accuracy)
  double ema_test_loss = NAN, ema_test_acc = NAN;  // with the EMA's weights (NaN without an EMA)
  double lr = 0;  // lr the epoch's last step used (the schedule at the step before the device's counter)
  double samples_per_s = 0, train_seconds = 0, seconds = 0;
};

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

struct TrainingResult {
  std::vector<EpochReport> epochs;
  double final_test_acc = NAN;  // the last epoch's test_acc (NaN: no test set)
  double seconds = 0;
};

class DeepLearningTask : public TaskBase {
 public:
  DeepLearningTask();
  ~DeepLearningTask() override;

  DeepLearningTask& model(BluePrint bp);
  DeepLearningTask& data(DataSpec spec);
  DeepLearningTask& data(data::Dataset train, data::Dataset test);
  DeepLearningTask& normalize(Normalization n);
  DeepLearningTask& batch_size(int64_t b);
  DeepLearningTask& val_batch_size(int64_t b);
  DeepLearningTask& epochs(int32_t e);
  DeepLearningTask& loss(CrossEntropyLoss l);
  DeepLearningTask& optimizer(Optimizer o);
  DeepLearningTask& scheduler(Scheduler s);
  DeepLearningTask& device(std::string d);
  DeepLearningTask& seed(uint64_t s);
  // Compute precision: DType::F32 (default), DType::BF16 or DType::F16 (mixed precision on a GPU:
  // CompileOptions::precision; fp16 with dynamic loss scaling on the device, PyTorch GradScaler semantics:
  // initial 2^16, x2 after 2000 clean steps, x0.5 and a skipped update on inf/NaN). The CPU backend computes
  // in fp32 only.
  DeepLearningTask& precision(DType p);
  // CompileOptions::early_update (default AUTO: for a first fc layer whose weight gradient is large, and in
  // mixed precision for a first conv): updates every parameter but the first layer's on the side stream
  // beside the first layer's backward (fp16: only casts and unscales their gradients there, the update
  // waits for every gradient's check). The same numbers either way. true / false force it on / off.
  DeepLearningTask& early_update(bool on);
  // CompileOptions::early_update_parts (default 5): with the early update (not fp16), up to n parts of the
  // deep conv weights updated while the backward still runs. The same numbers either way.
  DeepLearningTask& early_update_parts(int n);
  // CompileOptions::defer_fc_weight_gradients / defer_fc_min_macs (default on, for fc input gradients of
  // 1e8 multiply-adds or more): the same numbers either way.
  DeepLearningTask& defer_fc_weight_gradients(bool on, int64_t min_macs = 100'000'000);
  // CompileOptions::conv_join_lag_max (default 65536; 0: off): conv input gradients over at most this many
  // values per sample let the latest weight gradient run beside them. The same numbers; may need more memory.
  DeepLearningTask& conv_join_lag(int64_t max_values);
  // CompileOptions::fork_shortcuts (default on): a projection shortcut's layers run on the side stream
  // beside the residual block's main branch.
  DeepLearningTask& fork_shortcuts(bool on);
  // CompileOptions::fused_weight_cast (default on): in mixed precision the optimizer's updates write the
  // 16-bit weight copies themselves (a plugin without FR_KERNEL_WEIGHT_COPY needs it off).
  DeepLearningTask& fused_weight_cast(bool on);
  // CompileOptions::update_from_grads16 (default AUTO: in fp16; ON, OFF): in mixed precision the updates of
  // conv weights read the 16-bit gradients themselves, with no cast to f32 before them (a plugin without
  // FR_KERNEL_HALF_GRADS needs it OFF).
  DeepLearningTask& update_from_grads16(CompileOptions::Grads16Update mode);
  // CompileOptions::deferred_update (default AUTO, which is off; ON): a step's optimizer update runs at the
  // start of the next step, beside its forward. The same numbers; every training call ends with the last
  // update.
  DeepLearningTask& deferred_update(CompileOptions::DeferredUpdate mode);
  // CompileOptions::speculative_update (default AUTO, which is off: measured no faster on an H100; ON: fp16's
  // conv weights updated during the backward, with backups restored on a skipped step).
  DeepLearningTask& speculative_update(CompileOptions::SpeculativeUpdate mode);
  // CompileOptions::speculative_backups (default IN_UPDATE: the update kernels write the backups; COPIES:
  // copy nodes before them).
  DeepLearningTask& speculative_backups(CompileOptions::SpeculativeBackups mode);
  // CompileOptions::freeze_first_layer (default off): the first layer (a bias-free conv) keeps its initial
  // weights (or those written by write_param) and gets no weight gradient.
  DeepLearningTask& freeze_first_layer(bool on);
  // An exponential moving average of the weights (DESIGN §7; CompileOptions::ema_decay):
  // torch.optim.swa_utils AveragedModel with get_ema_multi_avg_fn(decay), updated on the device after every
  // `every`-th step (the first update copies the weights); batchnorm's running statistics are not averaged,
  // and evaluations with the average use the model's current ones. evaluate(true) and the epoch reports' ema_
  // figures evaluate with the averaged weights. decay in (0, 1); 0 turns it off.
  DeepLearningTask& ema(double decay, int32_t every = 1);
  // CompileOptions::fuse_head (default on): the training head (last fc, softmax cross-entropy, its input
  // gradient) as one node. The same numbers either way.
  DeepLearningTask& fuse_head(bool on);
  // CompileOptions::fuse_joins (default on): a batchnorm that only a residual join reads is computed by the
  // join (batchnorm_add). Off keeps batchnorm and add as two nodes (for comparison): the same numbers in
  // fp32; in bf16 / fp16 the fused form rounds bn(x) + shortcut once instead of twice.
  DeepLearningTask& fuse_joins(bool on);
  // CompileOptions::conv_stats (default AUTO: in mixed precision, in bf16 only on the convs the CUDA
  // backend's own kernels run): a batchnorm reading a conv takes its batch statistics from sums the conv
  // writes instead of its own pass over the map.
  DeepLearningTask& conv_stats(CompileOptions::ConvStats mode);
  // CompileOptions::grad_sums (default AUTO: in mixed precision): a batchnorm whose output gradient a join's
  // relu backward writes takes its gradient sums from that pass.
  DeepLearningTask& grad_sums(CompileOptions::GradSums mode);
  // CompileOptions::conv_prologue (default AUTO: in mixed precision, on the convs the CUDA backend fuses
  // it into): a batchnorm with relu whose only reader is a conv is applied by that conv as it reads its
  // input, and its output is never stored. The same values on the CUDA backend.
  DeepLearningTask& conv_prologue(CompileOptions::ConvPrologue mode);
  // CompileOptions::join_epilogue (default AUTO: in mixed precision, on the convs the CUDA backend's own
  // input gradient takes it): a residual join's masking pass done by the input gradient of the conv that
  // reads it. It folds the masking passes that carry gradient sums, so it needs grad_sums: ON without them
  // is refused at compile.
  DeepLearningTask& join_epilogue(CompileOptions::JoinEpilogue mode);
  // CompileOptions::join_prologue (default AUTO: off, measured no faster on an H100): a residual join's
  // batchnorm, add and relu applied by the conv that first reads its output, as it reads its input.
  DeepLearningTask& join_prologue(CompileOptions::JoinPrologue mode);
  // CompileOptions::compact_shortcut_grads (default AUTO: in mixed precision): a strided 1x1 projection
  // shortcut's input gradient written at its output positions only, added there by the join's masking pass.
  DeepLearningTask& compact_shortcut_grads(CompileOptions::CompactShortcutGrads mode);
  // CompileOptions::subsampled_shortcuts (default AUTO: bf16, small shortcut GEMMs): a stride-2
  // projection shortcut reads, in training, the even rows and columns its batchnorm_add join writes beside
  // its output.
  DeepLearningTask& subsampled_shortcuts(CompileOptions::SubsampledShortcuts mode);
  // Training-time augmentation applied while batches are staged (data/augment.h); evaluation is never
  // augmented.
  DeepLearningTask& augment(data::Augmentation a);
  DeepLearningTask& shuffle(bool on);
  // Progressive resolution (train_config.h, DESIGN §7): the first p.begin_epochs epochs at p's begin size,
  // the rest at its end size, each image resized while staged; evaluation at the data's size. Off by
  // default. run() and run_steps() pick the stage by epoch; train_step() and time_steps() run the begin
  // stage.
  DeepLearningTask& progressive_resolution(ProgressiveResolution p);
  // Data parallelism (DESIGN §10; default 1): n ranks, host threads of this process, each with its own
  // device (cpu: a context each; cuda: device r for rank r) and arena, training batch_size / n samples a
  // step, with every gradient averaged over the ranks before the update (allreduce_mean through the device's
  // collective backend: the cpu plugin's "threads"; NCCL is not built). An epoch's order is split as
  // PyTorch's DistributedSampler splits it (padded to a multiple of n by repeating its start, rank r taking
  // every n-th sample from r). This task is rank 0: it reports (every rank's train metrics added up at the
  // epoch's end, where the ranks meet: the other ranks wait for its evaluation and on_epoch callback),
  // evaluates (its own batchnorm statistics, as DDP's broadcast buffers make rank 0's everyone's; the val
  // batch defaults to a rank's batch) and saves checkpoints; writes and loads reach every rank. The others
  // are made and compiled by compile() with this task's settings (and a copy of the data). An error on any
  // rank stops every rank, is thrown here, and leaves the ranks unable to train or save (compile a new
  // task). batch_size must be a multiple of n; fp16 and early_update(true) are refused; train_step,
  // stage_batch, test_logits and time_steps are single-rank calls.
  DeepLearningTask& ranks(int32_t n);
  int32_t rank_count() const noexcept { return ranks_; }
  DeepLearningTask& on_epoch(std::function<void(const EpochReport&)> cb);

  // PLANNING -> MEMORY_LOCKED: loads the data and runs the Compiler (memory plans, graphs, atlas); no device
  // is touched, so a job can be inspected (fresco plan / graph) on any machine.
  void plan();
  // -> COMPILED: plan() if needed, then the arena, kernel preparation, capture and initial weights.
  void compile();
  // COMPILED: trains the next `epochs` epochs of the job (0: all that are left), each with an evaluation when
  // there is a test set; the report numbers epochs from the job's first. The compiled schedule covers the
  // job's epochs once: a call when all are done is a kUsage error.
  // An epoch left part-way (run_steps, or a checkpoint written there) counts as the first of `epochs` and is
  // finished from where it stopped.
  TrainingResult run(int32_t epochs = 0);
  // COMPILED: trains the next `steps` steps of the job (0: all that are left), epoch after epoch as run()
  // does, and may stop within an epoch: that epoch's report comes when a later run() / run_steps() finishes
  // it (its train loss and accuracy over all its steps). A call when all epochs are done is a kUsage error.
  TrainingResult run_steps(int64_t steps);
  // Epochs trained so far (by run(), or restored by load_checkpoint()), and the steps of the next one trained
  // so far (0 at an epoch boundary).
  int32_t epochs_done() const noexcept { return epochs_done_; }
  int64_t epoch_steps_done() const noexcept { return epoch_steps_done_; }
  // Steps of one epoch (known once planned).
  int64_t steps_per_epoch() const;

  // Checkpoints (COMPILED, between steps of run() / run_steps()): everything the next steps depend on,
  // device-independent: the fp32 master weights, the optimizer's moments, batchnorm's running statistics,
  // the step scalars (step and update counts, loss scale and its growth tracker; the lr and every random draw
  // are functions of them and the seed), the epochs done and the data position within the next one (with
  // that epoch's train metrics so far: its report covers all its steps). save_checkpoint writes them with a
  // header naming the job (model, precision, optimizer, batch, samples, epochs, seed) to PATH.tmp, then
  // renames it over PATH; load_checkpoint checks that header against this job (a different one is a
  // kBadConfig error naming what differs), the file's checksums and every tensor's name and size before
  // writing anything, then the next run() continues where the saved one stopped, with the same numbers as an
  // uninterrupted run. With weights_only, only the model must match and only the batchnorm running statistics
  // and the master weights are written (the optimizer's state, the counters and the epochs done stay this
  // job's): for evaluation (fresco eval), in any precision, or to start another job from trained weights.
  void save_checkpoint(const std::string& path);
  void load_checkpoint(const std::string& path, bool weights_only = false);

  // Step-level access (COMPILED), used by golden checks, parity and tests.
  // One optimizer step on the training samples idx[0..count); count <= batch. Returns the batch's mean loss.
  float train_step(const uint32_t* idx, int64_t count);
  // Stages samples idx[0..batch) into input buffer A and runs TRANSFER_A of train_base (for node-by-node
  // checks).
  void stage_batch(const uint32_t* idx, int64_t count);
  // With ema (the job has an EMA): the averaged weights evaluated in place of the trained ones, which are
  // put back afterwards.
  EvalResult evaluate(bool ema = false);
  // Logits of the first `count` test samples (count <= val batch), row-major [count, classes].
  std::vector<float> test_logits(int64_t count);
  // Parameters by layer index and name ("weight", "bias"), in PyTorch layout (fc weight [out, in]).
  std::vector<float> read_param(int32_t layer, const std::string& which);
  // The EMA's average of that parameter (the job must have an EMA).
  std::vector<float> read_ema_param(int32_t layer, const std::string& which);
  // The layer index of a BluePrint path ("3", "5.main.0", "5.shortcut.1"; a residual block's own path is its
  // join).
  int32_t layer_index(const std::string& path) const;
  void write_param(int32_t layer, const std::string& which, const std::vector<float>& values);
  // Every trainable tensor, W then G/M/V (for determinism checks and parity).
  std::vector<std::pair<std::string, std::vector<float>>> snapshot();
  // The same of rank r's replica (ranks(n); r = 0 is this task), to check that the ranks stay in step.
  std::vector<std::pair<std::string, std::vector<float>>> snapshot_of_rank(int32_t r);
  // Writes back what snapshot() returned (of this job or of the same job compiled on another device, at the
  // same step): every tensor by name, then the compute copies of the weights are cast again. The next step
  // then starts from that state (parity's --resync). Not part of it: the step counter, the loss scale and the
  // batchnorm running statistics (which no training step reads). A state whose names or sizes do not match
  // this job is refused before anything is written.
  void restore(const std::vector<std::pair<std::string, std::vector<float>>>& state);
  float current_lr();
  // Device bytes held by this job (arena + workspaces), for memory reports.
  uint64_t device_memory_bytes() const;
  // Benchmark helper: stages one batch of the first `batch` training samples, then runs `steps` full training
  // steps (transfer + fused step) back to back and synchronizes; returns the wall seconds. Trains the model.
  double time_steps(int steps);

  const CompiledModel& compiled() const;
  Runtime& runtime();  // COMPILED: for diagnostics and benchmarks
  const std::string& device_name() const noexcept { return device_; }
  const data::Dataset& train_set() const noexcept { return train_; }
  const data::Dataset& test_set() const noexcept { return test_; }

 private:
  TensorId param_tensor(int32_t layer, const std::string& which) const;
  // The tensors snapshot() reads and restore() writes, in plan order: W, G, M and V.
  std::vector<const DTensor*> state_tensors() const;
  // The tensors a checkpoint holds, in plan order: B (batchnorm running statistics), W, M, V and the step
  // scalars.
  std::vector<const DTensor*> checkpoint_tensors() const;
  // The job a checkpoint's header names (JSON text), compared field by field on load.
  std::string checkpoint_header() const;
  // A tensor's name in a checkpoint: the layer's BluePrint path in place of its generated name.
  std::string checkpoint_name(const DTensor& t) const;
  void load_checkpoint_weights(const std::string& path, const checkpoint::Contents& c);
  // load_checkpoint's checks and writes on this rank, from contents read once for every rank.
  void load_checkpoint_contents(const std::string& path, const checkpoint::Contents& c, bool weights_only);
  // run() / run_steps(): from the current position until epoch `end` starts or `budget` steps have run
  // (-1: no limit).
  TrainingResult train_until(int32_t end, int64_t budget);
  // run() / run_steps(): COMPILED, the ranks usable, an epoch left (kUsage naming `call` otherwise).
  void require_epochs_left(const char* call) const;
  // train_until on every rank at once (on_every_rank), or on this one alone; rank 0's result.
  TrainingResult train_every_rank(int32_t end, int64_t budget);
  // Mixed precision: refreshes the low-precision compute weights (A) from the masters (W).
  void cast_weights();
  // Data parallelism (core/src/data_parallel.cpp): the settings a replica takes from this task; the
  // replicas of ranks 1..n-1, made and compiled with this one; f on every rank at once (this one on the
  // calling thread), an error on any stopping all (the group aborted) and the first one thrown here; the
  // part of an epoch's order this rank trains; a kUsage error for the single-rank calls.
  void copy_settings_to(DeepLearningTask& t) const;
  void compile_ranks();
  void on_every_rank(const std::function<void(DeepLearningTask&)>& f);
  std::vector<uint32_t> rank_order(const std::vector<uint32_t>& order) const;
  void require_one_rank(const char* call) const;
  // With several ranks: kUsage after an abort; for a call that trains or sets the ranks' position
  // (moves_position), also from inside a run of the ranks (an on_epoch callback), and kInternal when a rank's
  // position differs from rank 0's (they would wait on each other).
  void require_ranks_usable(const char* call, bool moves_position = true) const;
  // f on this rank, then on every other one; an error part way aborts the group (the ranks may differ).
  void on_all_ranks_or_stop(const char* what, const std::function<void(DeepLearningTask&)>& f);
  // write_param and restore on this rank alone.
  void write_param_here(int32_t layer, const std::string& which, const std::vector<float>& values);
  void restore_here(const std::vector<std::pair<std::string, std::vector<float>>>& state);
  void compile_this_rank();
  void init_parameters();

  BluePrint bp_;
  DataSpec data_spec_;
  bool have_data_ = false;
  data::Dataset train_, test_;
  Normalization norm_;
  bool norm_set_ = false;
  int64_t batch_ = 128, val_batch_ = 0;
  int32_t epochs_ = 1;
  CrossEntropyLoss loss_;
  Optimizer opt_ = AdamW();
  Scheduler sched_;
  Scheduler sched_run_;  // what the device runs: sched_, or the table of a per-epoch kind (compile)
  std::string device_ = "auto";
  uint64_t seed_ = 0;
  // The builder's compile settings (precision, the fusions, the early update, the EMA, ...): compile()
  // starts from them and adds what the data and the other settings give; replicas take them whole.
  CompileOptions options_;
  // The E tensors with their W tensors (the EMA's), and a swap of the two families' values (evaluate(true)).
  std::vector<std::pair<TensorId, TensorId>> ema_pairs() const;
  void swap_ema_weights();
  std::vector<float> read_param_values(int32_t layer, const std::string& which, TensorId id);
  int32_t epochs_done_ = 0;         // run() trains epochs_done_ .. epochs_ - 1
  int64_t epoch_steps_done_ = 0;    // of epoch epochs_done_: its first steps are trained already
  bool steps_outside_run_ = false;  // train_step() since the last epoch boundary: no checkpoint
  data::Augmentation augment_;
  bool shuffle_ = true;
  ProgressiveResolution progressive_;
  int32_t ranks_ = 1, rank_ = 0;
  bool in_ranks_ = false;      // rank 0 inside on_every_rank
  int32_t logged_stage_ = -1;  // the progressive stage last named in the log (0 begin, 1 end; -1 none)
  std::function<void(const EpochReport&)> on_epoch_;
  // The ranks' collective group, shared by every rank's task: declared before the runtimes, so it goes
  // after every communicator on it.
  std::shared_ptr<CommGroup> group_;
  std::unique_ptr<CompiledModel> model_;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<Executor> exec_;
  std::vector<std::unique_ptr<DeepLearningTask>> replicas_;  // ranks 1..n-1 (rank 0 only)
};

}  // namespace fresco
