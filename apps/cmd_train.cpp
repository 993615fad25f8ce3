// `fresco train JOB`: one progress line per epoch, then the final test accuracy; with --save a checkpoint
// after every epoch (and every --save-every-steps N steps within one), --resume continues from one (at the
// step it was written), --stop-after N stops after N epochs of this invocation, --stop-after-steps N after N
// steps.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/job.h"

namespace fresco::cli {

std::string format_epoch_line(int epoch, int epochs, double train_loss, double test_loss, double test_acc,
                              double lr, double samples_per_s, double seconds) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "epoch %3d/%-3d  train loss %.4f  test loss %.4f  test top-1 %6.2f%%  lr %.3e  %9.0f "
                "samples/s  %6.2f s",
                epoch, epochs, train_loss, test_loss, 100.0 * test_acc, lr, samples_per_s, seconds);
  return buf;
}

void check_data_path(const JobSpec& job, const std::string& job_file, bool from_option) {
  std::error_code ec;
  FRESCO_CHECK(std::filesystem::exists(job.data.path, ec), ErrorCode::kMissingInput,
               job.data.path + ": no such file or directory (" +
                   (from_option ? std::string("given by --data")
                                : "the data.path of " + job_file +
                                      ", taken from its folder; --data PATH gives another") +
                   ")");
}

int cmd_train(const TrainArgs& a) {
  FRESCO_CHECK(a.save_every_steps == 0 || !a.save.empty(), ErrorCode::kUsage,
               "--save-every-steps writes the --save checkpoint; give --save PATH too");
  JobSpec job = load_job(a.job);
  if (!a.device.empty()) job.device = a.device;
  if (a.epochs > 0) job.epochs = a.epochs;
  if (a.seed >= 0) job.seed = static_cast<uint64_t>(a.seed);
  if (!a.precision.empty()) job.precision = parse_precision(a.precision, "--precision");
  if (!a.data_path.empty()) job.data.path = a.data_path;
  check_data_path(job, a.job, !a.data_path.empty());
  {  // the checkpoint files, before the data is loaded and the job compiled
    std::error_code ec;
    FRESCO_CHECK(a.resume.empty() || std::filesystem::is_regular_file(a.resume, ec), ErrorCode::kMissingInput,
                 a.resume + ": no such checkpoint file (--resume)");
    if (!a.save.empty()) {  // a file that can be written: tried now, not after the first epoch
      const std::filesystem::path dir = std::filesystem::absolute(a.save, ec).parent_path();
      FRESCO_CHECK(std::filesystem::is_directory(dir, ec), ErrorCode::kMissingInput,
                   a.save + ": the folder " + dir.string() + " does not exist (--save)");
      FRESCO_CHECK(!std::filesystem::is_directory(a.save, ec), ErrorCode::kUsage,
                   a.save + " is a folder; --save takes a file name");
      const std::string probe = a.save + ".tmp";
      std::FILE* f = std::fopen(probe.c_str(), "wb");
      FRESCO_CHECK(f, ErrorCode::kIo, probe + ": cannot be written (--save)");
      std::fclose(f);
      std::filesystem::remove(probe, ec);
    }
  }
  DeepLearningTask task;
  configure(task, job);
  if (a.samples > 0) {  // the data loaded here, cut, instead of by compile()
    auto [train, test] = data::load_train_test(job.data.kind, job.data.path);
    data::keep_first(train, a.samples);
    task.data(std::move(train), std::move(test))
        .normalize(job.normalize_set ? job.normalize : default_normalization(job.data.kind));
  }
  task.on_epoch([&](const EpochReport& r) {
    std::string line = format_epoch_line(r.epoch, job.epochs, r.train_loss, r.test_loss, r.test_acc, r.lr,
                                         r.samples_per_s, r.seconds);
    if (!std::isnan(r.ema_test_acc)) {
      char ema[64];
      std::snprintf(ema, sizeof ema, "  ema top-1 %6.2f%%", 100.0 * r.ema_test_acc);
      line += ema;
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  std::printf("job %s: %s, %s, batch %lld, %d epoch%s, %s\n", job.name.c_str(), job.model.describe().c_str(),
              job.optimizer.name(), static_cast<long long>(job.batch_size), job.epochs,
              job.epochs == 1 ? "" : "s", dtype_name(job.precision));
  task.compile();
  std::printf("device %s%s, %lld training / %lld test samples\n", task.device_name().c_str(),
              task.rank_count() > 1 ? (" x " + std::to_string(task.rank_count()) + " ranks").c_str() : "",
              static_cast<long long>(task.train_set().n), static_cast<long long>(task.test_set().n));
  if (!a.resume.empty()) {
    task.load_checkpoint(a.resume);
    if (task.epoch_steps_done() > 0)
      std::printf("resumed from %s at step %lld of %lld of epoch %d of %d\n", a.resume.c_str(),
                  static_cast<long long>(task.epoch_steps_done()),
                  static_cast<long long>(task.steps_per_epoch()), task.epochs_done() + 1, job.epochs);
    else
      std::printf("resumed from %s after epoch %d of %d\n", a.resume.c_str(), task.epochs_done(), job.epochs);
  }
  std::fflush(stdout);
  if (task.epochs_done() == job.epochs) {
    std::printf("all %d epochs are done; nothing to train\n", job.epochs);
    return 0;
  }
  // One epoch at a time (or a part of one: --save-every-steps, --stop-after-steps), so a checkpoint follows
  // each.
  double seconds = 0, final_acc = 0;
  int64_t steps_left = a.stop_after_steps > 0 ? a.stop_after_steps : -1;
  for (int n = 0;
       task.epochs_done() < job.epochs && (a.stop_after == 0 || n < a.stop_after) && steps_left != 0;) {
    int64_t part = task.steps_per_epoch() - task.epoch_steps_done();  // to the epoch's end
    if (a.save_every_steps > 0 && !a.save.empty()) part = std::min(part, a.save_every_steps);
    if (steps_left > 0) part = std::min(part, steps_left);
    const int32_t before = task.epochs_done();
    const TrainingResult r = task.run_steps(part);
    if (steps_left > 0) steps_left -= part;
    seconds += r.seconds;
    if (!r.epochs.empty()) final_acc = r.final_test_acc;
    n += task.epochs_done() - before;
    if (!a.save.empty()) task.save_checkpoint(a.save);
  }
  if (task.epochs_done() < job.epochs) {
    const std::string where = task.epoch_steps_done() > 0
                                  ? "at step " + std::to_string(task.epoch_steps_done()) + " of " +
                                        std::to_string(task.steps_per_epoch()) + " of epoch " +
                                        std::to_string(task.epochs_done() + 1)
                                  : "after epoch " + std::to_string(task.epochs_done());
    std::printf("stopped %s of %d (%.1f s)%s\n", where.c_str(), job.epochs, seconds,
                a.save.empty() ? "" : ("; continue with --resume " + a.save).c_str());
    return 0;
  }
  std::printf("final test accuracy: %.2f%% (%d epoch%s, %.1f s)\n", 100.0 * final_acc, job.epochs,
              job.epochs == 1 ? "" : "s", seconds);
  return 0;
}

}  // namespace fresco::cli
