// Benchmark: the MLP 784-1024-512-256-10 (AdamW, label smoothing 0.1, fp32, no TF32) on Fashion-MNIST.
// Prints JSON lines: per epoch the wall time of the training pass (staging and H2D transfer included,
// evaluation excluded); then the steady-state step time from back-to-back steps on a staged batch; device
// memory held; and the floor: FLOPs / peak fp32 rate and bytes / memory bandwidth (rates given by
// --peak-tflops / --peak-tbs). Usage: bench_mlp_epoch [--device cpu|cuda] [--batch 128] [--epochs 2] [--steps
// 500] [--data DIR]
//                        [--peak-tflops 67] [--peak-tbs 4.23]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench_args.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "mlp_job.h"

int main(int argc, char** argv) {
  using namespace fresco;
  const bench::Args args(argc, argv,
                         {{"device", "cpu"},
                          {"batch", "128"},
                          {"epochs", "2"},
                          {"steps", "500"},
                          {"data", "/usr/share/datasets/fashion-mnist"},
                          {"peak-tflops", "67"},
                          {"peak-tbs", "4.23"},
                          {"early-update", "auto"},
                          {"defer-fc-wgrad", "1"},
                          {"fuse-head", "1"},
                          {"windows", "1"}});
  const std::string device = args.str("device"), dir = args.str("data");
  const int64_t batch = args.integer("batch");
  const int epochs = static_cast<int>(args.integer("epochs")),
            steps = static_cast<int>(args.integer("steps"));
  // Defaults: H200 datasheet fp32 (non-tensor) rate and the copy bandwidth measured on it (NOTES.md).
  const double peak_tflops = args.real("peak-tflops"), peak_tbs = args.real("peak-tbs");
  try {
    // --windows N: N timed windows of --steps steps one after another, one line each (the last is the one
    // tools read), to see whether the step time drifts while the GPU keeps running.
    const int windows = static_cast<int>(args.integer("windows"));
    if (windows < 1) throw Error(ErrorCode::kBadConfig, "--windows must be at least 1");
    const std::vector<int64_t> widths = {784, 1024, 512, 256, 10};
    DeepLearningTask task;
    bench::configure_mlp(task, dir, batch, device).epochs(epochs).seed(1);
    if (args.str("early-update") != "auto") task.early_update(args.integer("early-update") != 0);
    task.defer_fc_weight_gradients(args.integer("defer-fc-wgrad") != 0);
    task.fuse_head(args.integer("fuse-head") != 0);
    const int64_t steps_per_epoch = (60000 + batch - 1) / batch;
    task.on_epoch([&](const EpochReport& r) {
      std::printf(
          "{\"bench\":\"mlp_epoch\",\"backend\":\"%s\",\"batch\":%lld,\"dtype\":\"f32\",\"epoch\":%d,"
          "\"epoch_s\":%.5f,\"ms_step\":%.5f,\"samples_per_s\":%.1f,\"test_acc\":%.4f}\n",
          task.device_name().c_str(), static_cast<long long>(batch), r.epoch, r.train_seconds,
          1000.0 * r.train_seconds / static_cast<double>(steps_per_epoch), r.samples_per_s, r.test_acc);
      std::fflush(stdout);
    });
    task.compile();
    task.run();
    task.time_steps(20);  // warm-up
    // FLOPs per step: forward and weight gradient for every layer, input gradient for all but the first.
    double params = 0, first = 0;
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      const double p = static_cast<double>(widths[i]) * static_cast<double>(widths[i + 1]);
      params += p;
      if (i == 0) first = p;
    }
    const double flops = 2.0 * static_cast<double>(batch) * (3.0 * params - first);
    // Bytes per step at least: AdamW reads w, g, m, v and writes w, m, v (fp32), weights read by the GEMMs.
    const double bytes = 4.0 * params * (7.0 + 2.0);
    for (int w = 0; w < windows; ++w) {
      const double ms = 1000.0 * task.time_steps(steps) / steps;
      std::printf(
          "{\"bench\":\"mlp_step\",\"backend\":\"%s\",\"batch\":%lld,\"dtype\":\"f32\",\"steps\":%d,"
          "\"window\":%d,\"ms_step\":%.5f,"
          "\"samples_per_s\":%.1f,\"device_mib\":%.1f,\"gflop_step\":%.4f,\"mb_step\":%.2f,"
          "\"floor_flops_ms\":%.5f,\"floor_bytes_ms\":%.5f}\n",
          task.device_name().c_str(), static_cast<long long>(batch), steps, w, ms, batch * 1000.0 / ms,
          task.device_memory_bytes() / 1048576.0, flops / 1e9, bytes / 1e6,
          flops / (peak_tflops * 1e12) * 1e3, bytes / (peak_tbs * 1e12) * 1e3);
      std::fflush(stdout);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
