// CompileOptions::freeze_first_layer on CUDA in mixed precision (the early update in parts, the stem on
// fresco's own kernels): the first conv's master weights keep their bits over training steps while the
// loss falls. Skipped without a GPU (the CPU twin: tests/e2e/test_freeze_first_layer_cpu.cpp).
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/models.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

TEST(CudaFreeze, FirstConvKeepsItsBitsInMixedPrecision) {
  FRESCO_REQUIRE_GPU();
  FRESCO_REQUIRE_FASHION_MNIST();
  const data::Dataset samples =
      e2e::first_samples(data::load_mnist_dir(e2e::kFashionDir, "train", "f"), 1024);
  for (DType precision : {DType::BF16, DType::F16}) {
    DeepLearningTask t;
    t.model(models::small_resnet(10))
        .data(samples, samples)
        .normalize(Normalization{{0.286f}, {0.353f}})
        .batch_size(128)
        .optimizer(SGD(0.9f, true).base_lr(0.05f).with_weight_decay(5e-4f))
        .loss(CrossEntropyLoss())
        .device("cuda")
        .precision(precision)
        .seed(3)
        .freeze_first_layer(true);
    t.compile();
    const std::vector<float> w0 = t.read_param(0, "weight");
    std::vector<uint32_t> idx(1024);
    std::iota(idx.begin(), idx.end(), 0u);
    float first = 0, last = 0;
    for (int s = 0; s < 24; ++s) {
      last = t.train_step(idx.data() + 128 * (s % 8), 128);
      if (s == 0) first = last;
    }
    const std::vector<float> w = t.read_param(0, "weight");
    ASSERT_EQ(w.size(), w0.size());
    EXPECT_EQ(0, std::memcmp(w.data(), w0.data(), w.size() * sizeof(float))) << dtype_name(precision);
    EXPECT_LT(last, first) << dtype_name(precision);
  }
}
