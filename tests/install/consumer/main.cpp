// Out-of-tree consumer of an installed fresco: trains a small MLP on a synthetic, learnable data set on the
// CPU backend, which libfresco finds in its installed plugin folder with no environment variable. Exit 0 when
// the training loss falls and the test accuracy beats chance by far.
#include <cstdio>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"

int main() {
  using namespace fresco;
  try {
    // Class k lights up a 2x2 patch at a k-dependent place of an 8x8 image, plus noise.
    DeepLearningTask task;
    task.model(seq({fc(32), relu(), fc(4)}))
        .data(data::synthetic_patches(2000, 0), data::synthetic_patches(400, 7))
        .batch_size(50)
        .epochs(3)
        .optimizer(AdamW().base_lr(1e-2f))
        .device("cpu");
    task.compile();
    const TrainingResult r = task.run();
    std::printf("consumer: loss %.4f -> %.4f, test accuracy %.3f\n", r.epochs.front().train_loss,
                r.epochs.back().train_loss, r.final_test_acc);
    return r.epochs.back().train_loss < r.epochs.front().train_loss && r.final_test_acc > 0.9 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return e.exit_status();
  }
}
