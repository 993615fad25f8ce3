// `fresco plan JOB` (the memory map of the compiled job: text summary on stdout, picture as SVG) and
// `fresco graph JOB` (atlas.dot, train.dot, inference.dot). Both plan the job on the CPU without a device,
// kernels or training: they only load the data and run the Compiler. Tested by tests/core/test_inspect.cpp
// (the outputs) and by hand (docs/inspecting.md).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/inspect.h"
#include "fresco/core/job.h"

namespace fresco::cli {

namespace {

// Plans the job (data + Compiler) with the device pinned to "cpu", so nothing probes a GPU.
void plan_job(const PlanArgs& a, DeepLearningTask& task, JobSpec& job) {
  job = load_job(a.job);
  if (!a.data_path.empty()) job.data.path = a.data_path;
  check_data_path(job, a.job, !a.data_path.empty());
  configure(task, job);
  task.device("cpu");
  task.plan();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  FRESCO_CHECK(f.good(), ErrorCode::kIo, "cannot open '" + path.string() + "' for writing");
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  FRESCO_CHECK(f.good(), ErrorCode::kIo, "writing '" + path.string() + "' failed");
}

}  // namespace

int cmd_plan(const PlanArgs& a) {
  DeepLearningTask task;
  JobSpec job;
  plan_job(a, task, job);
  const CompiledModel& m = task.compiled();
  std::printf("job %s: %s\n", job.name.c_str(), job.model.describe().c_str());
  std::fputs(memory_map_text(m).c_str(), stdout);
  const std::string svg = memory_map_svg(m);
  const std::string path = a.svg.empty() ? "plan.svg" : a.svg;
  write_file(path, svg);
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), svg.size());
  return 0;
}

int cmd_graph(const PlanArgs& a) {
  DeepLearningTask task;
  JobSpec job;
  plan_job(a, task, job);
  const CompiledModel& m = task.compiled();
  const std::filesystem::path dir = a.out_dir.empty() ? "." : a.out_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  FRESCO_CHECK(!ec, ErrorCode::kIo, "cannot create directory '" + dir.string() + "': " + ec.message());
  write_file(dir / "atlas.dot", atlas_dot(m));
  write_file(dir / "train.dot", graph_dot(m, true));
  write_file(dir / "inference.dot", graph_dot(m, false));
  auto gids = [](const ComputationGraph& g) {
    int n = 0;
    for (int i = 0; i < kGraphIdCount; ++i) n += g.empty(static_cast<GraphId>(i)) ? 0 : 1;
    return n;
  };
  const AtlasStats st = m.atlas.stats();
  std::printf("job %s: %s\n", job.name.c_str(), job.model.describe().c_str());
  std::printf("train graph: %zu nodes in %d GraphIds; inference graph: %zu nodes in %d GraphIds\n",
              m.train->node_count(), gids(*m.train), m.inference->node_count(), gids(*m.inference));
  std::printf("atlas: %d non-empty slots, %d unique captures, %d slots reuse a capture\n", st.slots,
              st.unique, st.reused);
  std::printf("wrote %s, %s, %s (render with: dot -Tsvg FILE -o FILE.svg)\n", (dir / "atlas.dot").c_str(),
              (dir / "train.dot").c_str(), (dir / "inference.dot").c_str());
  return 0;
}

}  // namespace fresco::cli
