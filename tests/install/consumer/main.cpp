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
    auto make = [](int64_t n, uint32_t salt) {
      data::Dataset d;
      d.n = n, d.h = 8, d.w = 8, d.c = 1, d.num_classes = 4;
      d.images.resize(static_cast<size_t>(n * 64));
      d.labels.resize(static_cast<size_t>(n));
      uint32_t s = 12345u + salt;
      for (int64_t i = 0; i < n; ++i) {
        const int k = static_cast<int>(i % 4);
        d.labels[static_cast<size_t>(i)] = k;
        for (int p = 0; p < 64; ++p) {
          s = s * 1664525u + 1013904223u;
          d.images[static_cast<size_t>(i * 64 + p)] = static_cast<uint8_t>(s >> 26);
        }
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx)
            d.images[static_cast<size_t>(i * 64 + (2 * k + dy) * 8 + 2 * k + dx)] = 255;
      }
      return d;
    };
    DeepLearningTask task;
    task.model(seq({fc(32), relu(), fc(4)}))
        .data(make(2000, 0), make(400, 7))
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
