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

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"

int main(int argc, char** argv) {
  using namespace fresco;
  std::string device = "cpu", dir = "/usr/share/datasets/fashion-mnist";
  int64_t batch = 128;
  int epochs = 2, steps = 500;
  double peak_tflops = 67.0,
         peak_tbs = 4.23;  // H200: datasheet fp32 (non-tensor) and measured copy bandwidth
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--device")
      device = v;
    else if (a == "--batch")
      batch = std::atoll(v.c_str());
    else if (a == "--epochs")
      epochs = std::atoi(v.c_str());
    else if (a == "--steps")
      steps = std::atoi(v.c_str());
    else if (a == "--data")
      dir = v;
    else if (a == "--peak-tflops")
      peak_tflops = std::atof(v.c_str());
    else if (a == "--peak-tbs")
      peak_tbs = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 64;
    }
  }
  try {
    const std::vector<int64_t> widths = {784, 1024, 512, 256, 10};
    DeepLearningTask task;
    task.model(seq({fc(1024), relu(), fc(512), relu(), fc(256), relu(), fc(10)}))
        .data(FashionMnist(dir))
        .batch_size(batch)
        .loss(CrossEntropyLoss().label_smoothing(0.1f))
        .optimizer(AdamW().base_lr(1e-3f).with_weight_decay(1e-4f))
        .epochs(epochs)
        .device(device)
        .seed(1);
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
    const double s = task.time_steps(steps);
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
    const double ms = 1000.0 * s / steps;
    std::printf(
        "{\"bench\":\"mlp_step\",\"backend\":\"%s\",\"batch\":%lld,\"dtype\":\"f32\",\"steps\":%d,\"ms_"
        "step\":%.5f,"
        "\"samples_per_s\":%.1f,\"device_mib\":%.1f,\"gflop_step\":%.4f,\"mb_step\":%.2f,"
        "\"floor_flops_ms\":%.5f,\"floor_bytes_ms\":%.5f}\n",
        task.device_name().c_str(), static_cast<long long>(batch), steps, ms, batch * 1000.0 / ms,
        task.device_memory_bytes() / 1048576.0, flops / 1e9, bytes / 1e6, flops / (peak_tflops * 1e12) * 1e3,
        bytes / (peak_tbs * 1e12) * 1e3);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
