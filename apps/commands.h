// The subcommands of the `fresco` CLI. Each returns the process exit status; fresco::Error escapes to main(),
// which prints one line and maps the code to a sysexits status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fresco {
struct JobSpec;
}

namespace fresco::cli {

struct TrainArgs {
  std::string job;
  std::string device;     // empty: the job's
  int epochs = 0;         // 0: the job's
  int64_t seed = -1;      // -1: the job's; else its seed (initial draw, data order, augmentation, dropout)
  std::string precision;  // empty: the job's; fp32, bf16 or fp16
  std::string data_path;
  int64_t samples = 0;           // 0: all; else only the first N training samples
  std::string save;              // checkpoint written after every epoch (empty: none)
  std::string resume;            // checkpoint to continue from (empty: start)
  int stop_after = 0;            // stop after this many epochs of this invocation (0: train to the end)
  int64_t save_every_steps = 0;  // with save: also a checkpoint every N steps within an epoch (0: at epochs)
  int64_t stop_after_steps = 0;  // stop after this many steps of this invocation (0: no step limit)
};
int cmd_train(const TrainArgs& a);
// A job's data path that does not exist is one error naming it, where it came from and the way to another
// (--data), before any loader runs.
void check_data_path(const JobSpec& job, const std::string& job_file, bool from_option);
struct EvalArgs {
  std::string job, checkpoint;
  std::string device;     // empty: the job's
  std::string precision;  // empty: the job's
  std::string data_path;
};
int cmd_eval(const EvalArgs& a);
struct ParityArgs {
  std::string job;
  int steps = 20;
  std::string device_a = "cpu", device_b = "cuda";
  double tolerance = 1e-4;
  int64_t samples = 0;
  bool verbose = false;
  bool nodes = false;   // node-by-node mode: the first node whose outputs diverge
  bool resync = false;  // every step starts the second device from the first's state
};
int cmd_parity(const ParityArgs& a);
struct PlanArgs {
  std::string job;
  std::string svg;        // fresco plan: SVG file (empty: plan.svg)
  std::string out_dir;    // fresco graph: directory for atlas.dot, train.dot, inference.dot (empty: .)
  std::string data_path;  // override the job's dataset directory
};
int cmd_plan(const PlanArgs& a);
int cmd_graph(const PlanArgs& a);
int cmd_plugins(const std::vector<std::string>& extra_paths);
// `--plugin PATH` (any command): loads the named plugin files or folders before the default search; a path
// that does not exist or a plugin that is refused is an error.
void load_named_plugins(const std::vector<std::string>& paths);
int cmd_golden(const std::vector<std::string>& cases, const std::string& device, int max_steps);
std::string format_epoch_line(int epoch, int epochs, double train_loss, double test_loss, double test_acc,
                              double lr, double samples_per_s, double seconds);

}  // namespace fresco::cli
