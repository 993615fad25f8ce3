// Example: the README's main job written with the C++ API instead of a job file.
// Usage: mlp_fashion_mnist [DATA_DIR] [EPOCHS] [DEVICE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"

int main(int argc, char** argv) {
  using namespace fresco;
  const char* usage =
      "usage: mlp_fashion_mnist [DATA_DIR] [EPOCHS] [DEVICE]\n"
      "  DATA_DIR  Fashion-MNIST's .gz files (default /usr/share/datasets/fashion-mnist)\n"
      "  EPOCHS    a whole number, 1 or more (default 10)\n"
      "  DEVICE    cpu, cuda or auto (default auto)\n";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::printf("%s", usage);
      return 0;
    }
  if (argc > 4) {
    std::fprintf(stderr, "%s", usage);
    return 64;
  }
  try {
    const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    int epochs = 10;
    if (argc > 2) {
      char* end = nullptr;
      const long v = std::strtol(argv[2], &end, 10);
      if (end == argv[2] || *end != '\0' || v < 1 || v > 1000000) {
        std::fprintf(stderr, "error: EPOCHS must be a whole number from 1, found '%s'\n%s", argv[2], usage);
        return 64;
      }
      epochs = static_cast<int>(v);
    }
    auto net = seq({fc(1024), relu(), fc(512), relu(), fc(256), relu(), fc(10)});
    DeepLearningTask task;
    task.model(net)
        .data(FashionMnist(dir))
        .batch_size(128)
        .loss(CrossEntropyLoss().label_smoothing(0.1f))
        .optimizer(AdamW().base_lr(1e-3f).with_weight_decay(1e-4f))
        .scheduler(CosineAnnealingLR().warmup(1))
        .epochs(epochs)
        .device(argc > 3 ? argv[3] : "auto")
        .on_epoch([](const EpochReport& r) {
          std::printf("epoch %d: train loss %.4f, test loss %.4f, test top-1 %.2f%%, %.0f samples/s\n",
                      r.epoch, r.train_loss, r.test_loss, 100 * r.test_acc, r.samples_per_s);
        });
    task.compile();
    const TrainingResult r = task.run();
    std::printf("final test accuracy %.2f%%\n", 100 * r.final_test_acc);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  }
}
