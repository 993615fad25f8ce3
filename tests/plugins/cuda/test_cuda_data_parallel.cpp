// Data parallelism on GPUs (DeepLearningTask::ranks with the "nccl" collective backend, plugins/nccl): two
// ranks on two GPUs train an MLP to the weights of one GPU with the whole batch within float rounding, and
// a small ResNet in bf16 with every rank holding the same bits. The CPU twin:
// tests/e2e/test_data_parallel_cpu.cpp. Skipped below two GPUs or without the NCCL plugin; written without
// a multi-GPU machine and not yet run.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/models.h"
#include "plugins/cuda/gpu_fixture.h"
#include "support/relative_difference.h"

using namespace fresco;

namespace {
bool two_gpus_and_nccl() {
  if (!gpu_test::have_gpu()) return false;
  auto& reg = PluginRegistry::instance();
  const FrDeviceApi* cuda = reg.device("cuda");
  return cuda->device_count() >= 2 && reg.comm("cuda") != nullptr;
}

std::unique_ptr<DeepLearningTask> job(BluePrint model, DType precision, int32_t ranks) {
  static const data::Dataset train =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 2048);
  auto t = std::make_unique<DeepLearningTask>();
  t->model(std::move(model))
      .data(train, e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "test", "f"), 500))
      .normalize(Normalization{{0.286f}, {0.353f}})
      .batch_size(256)
      .epochs(2)
      .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
      .device("cuda")
      .precision(precision)
      .seed(3)
      .ranks(ranks);
  t->compile();
  return t;
}

}  // namespace

TEST(CudaDataParallel, TwoGpusTrainAsOneWithTheWholeBatch) {
  if (!two_gpus_and_nccl()) GTEST_SKIP() << "needs two GPUs and the NCCL plugin";
  FRESCO_REQUIRE_FASHION_MNIST();
  auto one = job(seq({flatten(), fc(256), relu(), fc(10)}), DType::F32, 1);
  auto two = job(seq({flatten(), fc(256), relu(), fc(10)}), DType::F32, 2);
  one->run();
  two->run();
  const auto s1 = one->snapshot(), s2 = two->snapshot(), r1 = two->snapshot_of_rank(1);
  ASSERT_EQ(s1.size(), s2.size());
  for (size_t i = 0; i < s1.size(); ++i) {
    EXPECT_EQ(r1[i].second, s2[i].second) << "rank 1 against rank 0: " << s2[i].first;
    if (s1[i].first.rfind("G(", 0) == 0) continue;
    EXPECT_LT(test::relative_difference(s2[i].second, s1[i].second), 1e-5) << s1[i].first;
  }
}

TEST(CudaDataParallel, SmallResNetInBf16KeepsTheRanksInStep) {
  if (!two_gpus_and_nccl()) GTEST_SKIP() << "needs two GPUs and the NCCL plugin";
  FRESCO_REQUIRE_FASHION_MNIST();
  auto two = job(models::small_resnet(10), DType::BF16, 2);
  const TrainingResult r = two->run();
  ASSERT_EQ(r.epochs.size(), 2u);
  EXPECT_LT(r.epochs[1].train_loss, r.epochs[0].train_loss);
  EXPECT_GT(r.epochs[1].test_acc, 0.6);
  EXPECT_EQ(two->snapshot_of_rank(1), two->snapshot());
}
