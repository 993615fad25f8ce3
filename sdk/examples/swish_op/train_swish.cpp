// Trains fc(32) -> swish -> fc(4) on a synthetic, learnable data set with the swish op library built beside
// it (loaded explicitly; FRESCO_PLUGIN_PATH would do too). Exit 0 when the loss falls and accuracy is high.
#include <cstdio>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"

int main(int argc, char** argv) {
  using namespace fresco;
  try {
    const char* plugin = argc > 1 ? argv[1] : SWISH_PLUGIN;
    if (!PluginRegistry::instance().load_file(plugin)) {
      for (const auto& r : PluginRegistry::instance().refused())
        if (r.path.find("swish") != std::string::npos)
          std::fprintf(stderr, "refused %s: %s\n", r.path.c_str(), r.reason.c_str());
      return 1;
    }
    DeepLearningTask task;
    task.model(seq({fc(32), custom("swish"), fc(4)}))
        .data(data::synthetic_patches(2000, 0), data::synthetic_patches(400, 3))
        .batch_size(50)
        .epochs(3)
        .optimizer(AdamW().base_lr(1e-2f))
        .device(argc > 2 ? argv[2] : "cpu");
    task.compile();
    const TrainingResult r = task.run();
    std::printf("train_swish: loss %.4f -> %.4f, test accuracy %.3f\n", r.epochs.front().train_loss,
                r.epochs.back().train_loss, r.final_test_acc);
    return r.epochs.back().train_loss < r.epochs.front().train_loss && r.final_test_acc > 0.9 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "train_swish: %s\n", e.what());
    return e.exit_status();
  }
}
