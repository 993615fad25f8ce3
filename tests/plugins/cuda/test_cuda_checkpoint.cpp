// Checkpoints on CUDA: a small ResNet trained one epoch, saved, and resumed in a newly compiled task ends
// with the bits of the same job run without a stop, in fp32, bf16 and fp16 (the compute copies cast again
// from the restored masters, the loss scale and its tracker restored); a checkpoint written on the GPU
// loads into the same job compiled on the CPU, and a bf16 run's weights into an fp32 one there. Skipped
// without a GPU (the CPU twin: tests/e2e/test_checkpoint_cpu.cpp).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/compiler.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/models.h"
#include "fresco/core/runtime.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

namespace {
std::unique_ptr<DeepLearningTask> job(const data::Dataset& d, DType precision, const std::string& device,
                                      const std::function<void(DeepLearningTask&)>& tweak = {}) {
  auto t = std::make_unique<DeepLearningTask>();
  t->model(models::small_resnet(10))
      .data(d, d)
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(128)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .scheduler(CosineAnnealingLR().warmup(1))
      .epochs(3)
      .device(device)
      .precision(precision)
      .seed(5);
  if (tweak) tweak(*t);
  t->compile();
  return t;
}
FrStepScalars scalars_of(DeepLearningTask& t) {
  FrStepScalars s{};
  t.runtime().download(t.compiled().base_plan(), t.compiled().t.step_scalars, &s, sizeof(s));
  return s;
}

// Every compile takes the same algorithms (the GEMMs' from one tuning file, cuDNN's heuristic first
// choices), as the other same-bits tests do: timing them again per compile may pick others.
struct SameChoices {
  gpu_test::TempPath tuning;
  gpu_test::ScopedEnv cache, find;
  explicit SameChoices(const std::string& name)
      : tuning(name), cache("FRESCO_CUDA_TUNING_CACHE", tuning.path), find("FRESCO_CUDNN_AUTOTUNE", "0") {}
};

data::Dataset thousand_samples() {
  return e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 1000);
}

std::string describe(const FrStepScalars& s) {
  return "step " + std::to_string(s.step) + " updates " + std::to_string(s.updates) + " loss_scale " +
         std::to_string(s.loss_scale) + " growth_tracker " + std::to_string(s.growth_tracker) + " skip " +
         std::to_string(s.skip_step) + " lr " + std::to_string(s.lr) + " epoch " + std::to_string(s.epoch);
}
}  // namespace

// Where a resumed run could part from the run that saved: the state right after load_checkpoint is the
// saved one (step scalars, weights, moments), and the saving task's next epoch and the resumed task's are
// the same bits, in each precision.
TEST(CudaCheckpoint, LoadedStateTrainsOnAsTheSavingTaskDoes) {
  FRESCO_REQUIRE_GPU();
  FRESCO_REQUIRE_FASHION_MNIST();
  const data::Dataset samples = thousand_samples();
  const std::string path = (std::filesystem::temp_directory_path() / "fresco_cuda_resume2.ckpt").string();
  const SameChoices same("fresco_checkpoint2_");
  for (DType precision : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(precision));
    auto first = job(samples, precision, "cuda");
    first->run(1);
    const FrStepScalars saved = scalars_of(*first);
    const auto state = first->snapshot();
    first->save_checkpoint(path);
    auto resumed = job(samples, precision, "cuda");
    resumed->load_checkpoint(path);
    const FrStepScalars loaded = scalars_of(*resumed);
    EXPECT_EQ(describe(loaded), describe(saved));
    const auto loaded_state = resumed->snapshot();
    ASSERT_EQ(loaded_state.size(), state.size());
    for (size_t i = 0; i < state.size(); ++i) {
      if (state[i].first.rfind("G(", 0) == 0) continue;  // gradients are the last step's, not state
      EXPECT_EQ(loaded_state[i].second, state[i].second) << state[i].first;
    }
    const TrainingResult a = first->run(1), b = resumed->run(1);
    EXPECT_EQ(describe(scalars_of(*resumed)), describe(scalars_of(*first)));
    ASSERT_EQ(a.epochs.size(), 1u);
    ASSERT_EQ(b.epochs.size(), 1u);
    EXPECT_EQ(b.epochs[0].train_loss, a.epochs[0].train_loss);
    EXPECT_EQ(resumed->snapshot(), first->snapshot());
    // and a third compile of the job trained two epochs in one run: the saving task's bits
    auto twin = job(samples, precision, "cuda");
    const TrainingResult c = twin->run(2);
    ASSERT_EQ(c.epochs.size(), 2u);
    EXPECT_EQ(c.epochs[1].train_loss, a.epochs[0].train_loss);
    EXPECT_EQ(describe(scalars_of(*twin)), describe(scalars_of(*first)));
    EXPECT_EQ(twin->snapshot(), first->snapshot());
  }
  std::filesystem::remove(path);
}

// A resumed run can only end with an uninterrupted run's bits if two compiles of one job train to the same
// bits: checked here for each precision, and in fp16 also with each of the compile's fp16-specific paths
// turned off in turn (the early gradient casts, the conv's statistics, the handed-over gradient sums,
// dependent launches), to name one that differs from compile to compile. cuDNN's fused statistics, which
// add with atomics, are off unless asked for (FRESCO_CUDNN_GENSTATS; docs/decisions.md).
TEST(CudaCheckpoint, TwoCompilesOfOneJobTrainToTheSameBits) {
  FRESCO_REQUIRE_GPU();
  FRESCO_REQUIRE_FASHION_MNIST();
  const data::Dataset samples = thousand_samples();
  const SameChoices same("fresco_checkpoint3_");
  struct Variant {
    std::string name;
    DType precision;
    std::function<void(DeepLearningTask&)> tweak;
    const char* env = nullptr;
  };
  const std::vector<Variant> variants = {
      {"fp32", DType::F32, {}},
      {"bf16", DType::BF16, {}},
      {"fp16", DType::F16, {}},
      {"fp16 without early gradient casts", DType::F16, [](DeepLearningTask& t) { t.early_update(false); }},
      {"fp16 without conv statistics", DType::F16,
       [](DeepLearningTask& t) { t.conv_stats(CompileOptions::ConvStats::OFF); }},
      {"fp16 without gradient sums", DType::F16,
       [](DeepLearningTask& t) { t.grad_sums(CompileOptions::GradSums::OFF); }},
      {"fp16 without dependent launch", DType::F16, {}, "FRESCO_CUDA_DEPENDENT_LAUNCH"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    std::optional<gpu_test::ScopedEnv> off;
    if (v.env) off.emplace(v.env, "0");
    auto a = job(samples, v.precision, "cuda", v.tweak), b = job(samples, v.precision, "cuda", v.tweak);
    const TrainingResult ra = a->run(1), rb = b->run(1);
    EXPECT_EQ(rb.epochs[0].train_loss, ra.epochs[0].train_loss);
    EXPECT_EQ(describe(scalars_of(*b)), describe(scalars_of(*a)));
    const auto sa = a->snapshot(), sb = b->snapshot();
    ASSERT_EQ(sa.size(), sb.size());
    int differ = 0;
    for (size_t i = 0; i < sa.size(); ++i)
      if (sa[i].second != sb[i].second && differ++ < 4) ADD_FAILURE() << sa[i].first << " differs";
    EXPECT_EQ(differ, 0) << "tensors differ";
  }
}

TEST(CudaCheckpoint, ResumedRunEndsWithTheBitsOfAnUninterruptedOne) {
  FRESCO_REQUIRE_GPU();
  FRESCO_REQUIRE_FASHION_MNIST();
  const data::Dataset samples = thousand_samples();
  const std::string path = (std::filesystem::temp_directory_path() / "fresco_cuda_resume.ckpt").string();
  const SameChoices same("fresco_checkpoint_");
  for (DType precision : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(precision));
    auto straight = job(samples, precision, "cuda");
    const TrainingResult all = straight->run();
    auto first = job(samples, precision, "cuda");
    first->run(1);
    first->save_checkpoint(path);
    auto resumed = job(samples, precision, "cuda");
    resumed->load_checkpoint(path);
    const TrainingResult rest = resumed->run();
    ASSERT_EQ(rest.epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) EXPECT_EQ(rest.epochs[e].train_loss, all.epochs[e + 1].train_loss) << e;
    EXPECT_EQ(resumed->snapshot(), straight->snapshot());
    if (precision == DType::F32) {  // the GPU's checkpoint on the CPU: the same state there
      auto cpu = job(samples, precision, "cpu");
      cpu->load_checkpoint(path);
      EXPECT_EQ(cpu->epochs_done(), 1);
      EXPECT_EQ(cpu->read_param(0, "weight"), first->read_param(0, "weight"));
    }
    if (precision == DType::BF16) {  // a bf16 run's weights evaluated in fp32 on the CPU (fresco eval): the
      // fc after the cast layer mixed precision inserts is found by its BluePrint path
      auto cpu = job(samples, DType::F32, "cpu");
      cpu->load_checkpoint(path, /*weights_only=*/true);
      const std::string fc = std::to_string(models::small_resnet(10).layers().size() - 1);
      EXPECT_EQ(cpu->read_param(cpu->layer_index(fc), "weight"),
                first->read_param(first->layer_index(fc), "weight"));
      EXPECT_EQ(cpu->read_param(0, "weight"), first->read_param(0, "weight"));
      EXPECT_NEAR(cpu->evaluate().accuracy, first->evaluate().accuracy, 0.02);
    }
  }
  std::filesystem::remove(path);
}
