// Benchmark: the MLP 784-1024-512-256-10 (AdamW, label smoothing 0.1) on Fashion-MNIST, one JSON line per
// epoch with the training wall time (staging and transfer included, evaluation excluded), ms/step and
// samples/s. Usage: bench_mlp_epoch [--device cpu|cuda|auto] [--batch 128] [--epochs 2] [--data DIR]
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
  int epochs = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--device"))
      device = argv[i + 1];
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--epochs"))
      epochs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--data"))
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 64;
    }
  }
  try {
    DeepLearningTask task;
    task.model(seq({fc(1024), relu(), fc(512), relu(), fc(256), relu(), fc(10)}))
        .data(FashionMnist(dir))
        .batch_size(batch)
        .loss(CrossEntropyLoss().label_smoothing(0.1f))
        .optimizer(AdamW().base_lr(1e-3f).with_weight_decay(1e-4f))
        .epochs(epochs)
        .device(device)
        .seed(1);
    const int64_t steps = (60000 + batch - 1) / batch;
    task.on_epoch([&](const EpochReport& r) {
      std::printf(
          "{\"bench\":\"mlp_epoch\",\"backend\":\"%s\",\"batch\":%lld,\"dtype\":\"f32\",\"epoch\":%d,"
          "\"epoch_s\":%.4f,\"ms_step\":%.4f,\"samples_per_s\":%.1f,\"test_acc\":%.4f}\n",
          task.device_name().c_str(), static_cast<long long>(batch), r.epoch, r.train_seconds,
          1000.0 * r.train_seconds / static_cast<double>(steps), r.samples_per_s, r.test_acc);
      std::fflush(stdout);
    });
    task.compile();
    task.run();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
