// `fresco eval JOB --checkpoint PATH`: the job's model with a checkpoint's weights (and batchnorm running
// statistics), evaluated on the job's test set: loss and top-1. Only the model must match the checkpoint's
// (DeepLearningTask::load_checkpoint, weights only), so a run trained in bf16 on a GPU evaluates on the CPU
// too. Tested by tests/e2e/test_cli.cpp (SaveStopAndResume).
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/job.h"

namespace fresco::cli {

int cmd_eval(const EvalArgs& a) {
  JobSpec job = load_job(a.job);
  if (!a.device.empty()) job.device = a.device;
  if (!a.precision.empty()) job.precision = parse_precision(a.precision, "--precision");
  if (!a.data_path.empty()) job.data.path = a.data_path;
  check_data_path(job, a.job, !a.data_path.empty());
  std::error_code ec;
  FRESCO_CHECK(std::filesystem::is_regular_file(a.checkpoint, ec), ErrorCode::kMissingInput,
               a.checkpoint + ": no such checkpoint file (--checkpoint)");
  DeepLearningTask task;
  configure(task, job);
  task.compile();
  FRESCO_CHECK(task.test_set().n > 0, ErrorCode::kBadConfig, a.job + ": the job's data has no test set");
  task.load_checkpoint(a.checkpoint, /*weights_only=*/true);
  const EvalResult r = task.evaluate();
  std::printf("%s on %s (%s): test loss %.4f  test top-1 %.2f%%  (%lld samples)\n", a.checkpoint.c_str(),
              task.device_name().c_str(), dtype_name(job.precision), r.loss, 100.0 * r.accuracy,
              static_cast<long long>(r.samples));
  return 0;
}

}  // namespace fresco::cli
