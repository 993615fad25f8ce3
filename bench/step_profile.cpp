// Diagnostic benchmark: where a training step's time goes. Compiles the MLP job, then times (1) each
// GraphId's captured graph of train_base launched alone, and (2) each kernel call of those graphs run eagerly
// on its own, each repeated --reps times after a warm-up. Prints one JSON line per graph and per call
// (microseconds each). Eager per-call times include one host launch per call, so tiny kernels show the launch
// cost. Usage: bench_step_profile [--device cuda] [--batch 128] [--reps 200] [--data DIR]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_args.h"
#include "call_profile.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/runtime.h"
#include "mlp_job.h"

int main(int argc, char** argv) {
  using namespace fresco;
  const bench::Args args(argc, argv,
                         {{"device", "cuda"},
                          {"batch", "128"},
                          {"reps", "200"},
                          {"warm", "10"},
                          {"data", "/usr/share/datasets/fashion-mnist"}});
  const std::string device = args.str("device"), dir = args.str("data");
  const int64_t batch = args.integer("batch");
  const int reps = static_cast<int>(args.integer("reps")), warm = static_cast<int>(args.integer("warm"));
  try {
    DeepLearningTask task;
    bench::configure_mlp(task, dir, batch, device);
    task.compile();
    task.time_steps(warm);  // training steps before profiling (late-training values can be slower on a CPU)
    Runtime& rt = task.runtime();
    const GraphAtlas& at = task.compiled().atlas;
    for (GraphId g :
         {GraphId::TRANSFER_A, GraphId::FIRST_LAYER_FWD_A, GraphId::DEEP_FWD_BWD, GraphId::FIRST_LAYER_BWD_A,
          GraphId::OPTIMIZER, GraphId::STEP_END, GraphId::ACCUM_METRICS}) {
      const int idx = at.slot(Variant::TRAIN_BASE, g).captured_idx;
      if (idx < 0) continue;
      for (int w = 0; w < 5; ++w) rt.launch_unordered(idx);
      rt.synchronize();
      const double t0 = bench::now_s();
      for (int r = 0; r < reps; ++r) rt.launch_unordered(idx);
      rt.synchronize();
      std::printf(
          "{\"bench\":\"graph\",\"backend\":\"%s\",\"batch\":%lld,\"graph\":\"%s\",\"nodes\":%zu,\"us\":%.2f}"
          "\n",
          device.c_str(), static_cast<long long>(batch), graph_id_name(g), rt.capture(idx).calls.size(),
          1e6 * (bench::now_s() - t0) / reps);
      for (const bench::CallTime& c : bench::time_calls(rt, idx, reps))
        std::printf("{\"bench\":\"call\",\"graph\":\"%s\",\"call\":\"%s\",\"us\":%.2f}\n", graph_id_name(g),
                    c.label.c_str(), c.us);
    }
    const double t = task.time_steps(reps);
    std::printf("{\"bench\":\"step\",\"backend\":\"%s\",\"batch\":%lld,\"us\":%.2f}\n", device.c_str(),
                static_cast<long long>(batch), 1e6 * t / reps);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
