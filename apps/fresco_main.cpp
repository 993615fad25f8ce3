// `fresco`: train a job, list plugins, replay golden cases. Exit statuses follow sysexits (64 usage, 65 bad
// data, 66 missing input, 70 internal, 74 I/O, 78 bad configuration). Tested by tests/e2e/test_cli.cpp.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "fresco/core/error.h"
#include "fresco/core/log.h"

int main(int argc, char** argv) {
  const char* kDataHelp = "override the job's data path (a dataset folder, or a .tar.gz of JPEG folders)";
  CLI::App app{"fresco: ahead-of-time compiled neural-network training"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level after the subcommand too
  std::string level;
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off (default: $FRESCO_LOG or info)");

  fresco::cli::TrainArgs ta;
  auto* train = app.add_subcommand("train", "train the model described by a job file (JSON)");
  train->add_option("job", ta.job, "job file, e.g. jobs/mlp_fashion_mnist.json")->required();
  train->add_option("--device", ta.device, "cpu, cuda or auto (default: the job's)");
  train->add_option("--epochs", ta.epochs, "override the job's epoch count")->check(CLI::Range(1, INT32_MAX));
  train
      ->add_option("--precision", ta.precision,
                   "fp32, bf16 or fp16 (default: the job's; low precision needs a GPU)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  train->add_option("--data", ta.data_path, kDataHelp);

  std::vector<std::string> plugin_paths;
  auto* plugins = app.add_subcommand("plugins", "list the plugins found and refused");
  plugins->add_option("paths", plugin_paths, "extra plugin files or directories, searched first");

  fresco::cli::ParityArgs pa;
  auto* parity = app.add_subcommand("parity", "train N steps on two devices and compare every tensor");
  parity->add_option("job", pa.job, "job file")->required();
  parity->add_option("--steps", pa.steps, "steps to train (default 20)")->check(CLI::Range(1, INT32_MAX));
  parity->add_option("--devices", pa.device_a, "first device (default cpu)");
  parity->add_option("--against", pa.device_b, "second device (default cuda)");
  parity->add_option("--tolerance", pa.tolerance, "largest accepted relative difference (default 1e-4)")
      ->check(CLI::NonNegativeNumber);
  parity->add_option("--samples", pa.samples, "use only the first N training samples (0: all)")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
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
  golden->add_option(
      "--steps", golden_steps,
      "replay only the first N steps and compare their losses (final tensors are then not compared)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 64;
  }
  try {
    if (!level.empty()) fresco::set_log_level(level);
    if (*train) return fresco::cli::cmd_train(ta);
    if (*plugins) return fresco::cli::cmd_plugins(plugin_paths);
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
