// `fresco`: train a job, list plugins, replay golden cases. Exit statuses follow sysexits (64 usage, 65 bad
// data, 66 missing input, 70 internal, 74 I/O, 78 bad configuration). Tested by tests/e2e/test_cli.cpp.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "fresco/core/error.h"
#include "fresco/core/log.h"

namespace {
// A number option's check (as a transform: a whole number is passed on in decimal, so "010" is 10 as
// checked, not CLI11's octal 8), with a message that says what was expected: a whole number (integer) or a
// finite number, at least lo (and at most hi).
CLI::Validator number_at_least(double lo, bool integer, double hi_in = -1) {
  const double hi = hi_in >= 0 ? hi_in : integer ? 9.2e18 : DBL_MAX;  // default: no bound of its own
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        const std::string kind = integer ? "a whole number" : "a number";
        const std::string bound =
            integer ? std::to_string(static_cast<long long>(lo)) : CLI::detail::to_string(lo);
        char* end = nullptr;
        errno = 0;
        const double x =
            integer ? static_cast<double>(std::strtoll(v.c_str(), &end, 10)) : std::strtod(v.c_str(), &end);
        if (v.empty() || end == v.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
          return "expected " + kind + " (at least " + bound + "), found '" + v + "'";
        if (x < lo) return "must be at least " + bound + ", found " + v;
        if (x > hi)
          return "must be at most " +
                 (integer ? std::to_string(static_cast<long long>(hi)) : CLI::detail::to_string(hi)) +
                 ", found " + v;
        if (integer) v = std::to_string(static_cast<long long>(x));  // decimal, as checked ("010" is 10)
        return {};
      },
      integer ? "INT>=" + std::to_string(static_cast<long long>(lo)) : "NUMBER>=0");
}

// Levenshtein distance, for "did you mean" on a mistyped command.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word that is not an option (nor --log-level's value), when it names no command: one line that
// says so, with the nearest command and the list. Empty when the command line names one (or none).
std::string unknown_command(int argc, char** argv, const std::vector<std::string>& commands) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--log-level" || a == "--plugin") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    for (const auto& c : commands)
      if (a == c) return {};
    std::string list, nearest;
    size_t best = 3;  // suggest only a near miss
    for (const auto& c : commands) {
      list += (list.empty() ? "" : ", ") + c;
      if (const size_t d = edit_distance(a, c); d < best) best = d, nearest = c;
    }
    return "unknown command '" + a + "'" + (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
           "; the commands are " + list + " (fresco --help)";
  }
  return {};
}
}  // namespace

int main(int argc, char** argv) {
  const char* kDataHelp = "override the job's data path (a dataset folder, or a .tar.gz of JPEG folders)";
  CLI::App app{"fresco: ahead-of-time compiled neural-network training"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level after the subcommand too
  std::string level;
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off (default: $FRESCO_LOG or info)");
  std::vector<std::string> plugin_files;
  app.add_option(
         "--plugin", plugin_files,
         "load this plugin file or folder before the default search (an op library, another backend); "
         "may be repeated")
      ->expected(1);

  fresco::cli::TrainArgs ta;
  auto* train = app.add_subcommand("train", "train the model described by a job file (JSON)");
  train->add_option("job", ta.job, "job file, e.g. jobs/mlp_fashion_mnist.json")->required();
  train->add_option("--device", ta.device, "cpu, cuda or auto (default: the job's)");
  train->add_option("--epochs", ta.epochs, "override the job's epoch count")
      ->transform(number_at_least(1, true, INT32_MAX));
  train
      ->add_option(
          "--seed", ta.seed,
          "override the job's seed (the weights' initial draw, the data order, augmentation, dropout; a "
          "checkpoint resumes only with its own)")
      ->transform(number_at_least(0, true));
  train
      ->add_option("--precision", ta.precision,
                   "fp32, bf16 or fp16 (default: the job's; low precision needs a GPU)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  train->add_option("--data", ta.data_path, kDataHelp);
  train->add_option("--samples", ta.samples, "train on the first N training samples only (default: all)")
      ->transform(number_at_least(1, true));
  train->add_option("--save", ta.save, "write a checkpoint to this file after every epoch");
  train->add_option("--resume", ta.resume,
                    "continue the job from this checkpoint (the same job: see --save)");
  train->add_option("--stop-after", ta.stop_after, "stop after N epochs (continue later with --resume)")
      ->transform(number_at_least(1, true, INT32_MAX));
  train
      ->add_option("--save-every-steps", ta.save_every_steps,
                   "with --save, also write the checkpoint every N steps within an epoch")
      ->transform(number_at_least(1, true));
  train
      ->add_option("--stop-after-steps", ta.stop_after_steps,
                   "stop after N training steps (continue later with --resume, at that step)")
      ->transform(number_at_least(1, true));

  fresco::cli::EvalArgs ea;
  auto* eval = app.add_subcommand("eval", "evaluate a checkpoint's weights on the job's test set");
  eval->add_option("job", ea.job, "job file (its model must be the checkpoint's)")->required();
  eval->add_option("--checkpoint", ea.checkpoint, "checkpoint file (fresco train --save)")->required();
  eval->add_option("--device", ea.device, "cpu, cuda or auto (default: the job's)");
  eval->add_option("--precision", ea.precision, "fp32, bf16 or fp16 (default: the job's)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  eval->add_option("--data", ea.data_path, kDataHelp);

  std::vector<std::string> plugin_paths;
  auto* plugins = app.add_subcommand("plugins", "list the plugins found and refused");
  plugins->add_option("paths", plugin_paths, "extra plugin files or directories, searched first");

  fresco::cli::ParityArgs pa;
  auto* parity = app.add_subcommand("parity", "train N steps on two devices and compare every tensor");
  parity->add_option("job", pa.job, "job file")->required();
  parity->add_option("--steps", pa.steps, "steps to train (default 20)")
      ->transform(number_at_least(1, true, INT32_MAX));
  parity->add_option("--device", pa.device_a, "first device (default cpu)");
  parity->add_option("--devices", pa.device_a)->group("");  // the earlier name, kept working
  parity->add_option("--against", pa.device_b, "second device (default cuda)");
  parity->add_option("--tolerance", pa.tolerance, "largest accepted relative difference (default 1e-4)")
      ->transform(number_at_least(0, false));
  parity->add_option("--samples", pa.samples, "use only the first N training samples (0: all)")
      ->transform(number_at_least(0, true));
  parity->add_flag("--verbose", pa.verbose, "print every step's loss on both devices");
  auto* resync = parity->add_flag("--resync", pa.resync,
                                  "start every step of the second device from the first's state (compares "
                                  "each step's arithmetic, not the trajectory)");
  parity->add_flag("--nodes", pa.nodes, "run the first step node by node and report the first divergent node")
      ->excludes(resync);

  fresco::cli::PlanArgs pl;
  auto* plan = app.add_subcommand("plan", "print the memory map of a compiled job and draw it as SVG");
  plan->add_option("job", pl.job, "job file")->required();
  plan->add_option("--svg", pl.svg, "SVG file to write (default plan.svg)");
  plan->add_option("--data", pl.data_path, kDataHelp);
  fresco::cli::PlanArgs gr;
  auto* graph = app.add_subcommand("graph", "write the GraphAtlas and the graphs as Graphviz DOT");
  graph->add_option("job", gr.job, "job file")->required();
  graph->add_option("--out", gr.out_dir, "directory for atlas.dot, train.dot, inference.dot (default .)");
  graph->add_option("--data", gr.data_path, kDataHelp);

  std::vector<std::string> cases;
  std::string golden_device = "cpu";
  auto* golden = app.add_subcommand("golden", "replay PyTorch golden cases and compare (exit 1 on any FAIL)");
  golden->add_option("cases", cases, "case directories (manifest.json + data.bin)")->required();
  golden->add_option("--device", golden_device, "cpu, cuda or auto");
  int golden_steps = 0;
  golden
      ->add_option(
          "--steps", golden_steps,
          "replay only the first N steps and compare their losses (final tensors are then not compared)")
      ->transform(number_at_least(1, true, INT32_MAX));

  const std::string unknown =
      unknown_command(argc, argv, {"train", "eval", "plugins", "parity", "plan", "graph", "golden"});
  if (!unknown.empty()) {
    std::fprintf(stderr, "fresco: error: %s\n", unknown.c_str());
    return 64;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 64;
  }
  try {
    if (!level.empty()) fresco::set_log_level(level);
    if (!plugin_files.empty()) fresco::cli::load_named_plugins(plugin_files);
    if (*train) return fresco::cli::cmd_train(ta);
    if (*plugins) return fresco::cli::cmd_plugins(plugin_paths);
    if (*eval) return fresco::cli::cmd_eval(ea);
    if (*golden) return fresco::cli::cmd_golden(cases, golden_device, golden_steps);
    if (*parity) return fresco::cli::cmd_parity(pa);
    if (*plan) return fresco::cli::cmd_plan(pl);
    if (*graph) return fresco::cli::cmd_graph(gr);
  } catch (const fresco::Error& e) {
    std::fprintf(stderr, "fresco: error: %s\n", e.what());
    return e.exit_status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fresco: internal error: %s\n", e.what());
    return 70;
  }
  return 64;
}
