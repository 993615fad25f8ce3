// The EMA of the weights on CUDA (ema_update in the captured OPTIMIZER graph): after each step its values
// are AveragedModel's, recomputed on the host from the weights after each step (within an fp32 rounding: the
// device may fuse the lerp's multiply-add), and evaluate(true) puts the trained weights back bit for bit.
// Skipped without a GPU (the CPU twin: tests/e2e/test_ema_cpu.cpp).
#include <cmath>
#include <numeric>
#include <vector>

#include "fresco/core/deep_learning_task.h"
#include "fresco/update_rules.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

TEST(CudaEma, AveragesTheWeightsLikeAveragedModel) {
  FRESCO_REQUIRE_GPU();
  DeepLearningTask t;
  t.model(seq({flatten(), fc(16), relu(), fc(4)}))
      .data(data::synthetic_patches(64, 1), data::synthetic_patches(32, 2))
      .batch_size(16)
      .optimizer(SGD(0.9f).base_lr(0.1f))
      .device("cuda")
      .seed(7)
      .ema(0.8, 2);
  t.compile();
  std::vector<uint32_t> idx(64);
  std::iota(idx.begin(), idx.end(), 0u);
  std::vector<float> want = t.read_param(1, "weight");
  for (int32_t step = 0; step < 6; ++step) {
    t.train_step(idx.data() + 16 * (step % 4), 16);
    const std::vector<float> w = t.read_param(1, "weight");
    const int action = fr_ema_action(step, 2);
    for (size_t i = 0; i < want.size(); ++i)
      if (action == 1)
        want[i] = w[i];
      else if (action == 2)
        want[i] = fr_ema_step(want[i], w[i], static_cast<float>(1.0 - 0.8));
    const std::vector<float> got = t.read_ema_param(1, "weight");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << "step " << step << " index " << i;
  }
  const auto before = t.snapshot();
  const EvalResult averaged = t.evaluate(true);
  EXPECT_EQ(t.snapshot(), before);
  EXPECT_GT(averaged.samples, 0);
}
