// Example: the README's main job written with the C++ API instead of a job file.
// Usage: mlp_fashion_mnist [DATA_DIR] [EPOCHS] [DEVICE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"

int main(int argc, char** argv) {
  using namespace fresco;
  try {
    const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    const int epochs = argc > 2 ? std::atoi(argv[2]) : 10;
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
