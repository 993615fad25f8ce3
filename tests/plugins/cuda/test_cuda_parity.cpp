// CPU vs CUDA parity of ResNet-18 in fp32 (jobs/resnet18_parity.json: CIFAR stem on Fashion-MNIST, batch 32,
// SGD Nesterov, label smoothing). Free-running, the two trajectories separate after the first step as
// PyTorch's own CPU and CUDA runs of this job do (a relu mask flipped by one rounding, then amplified;
// docs/decisions.md); resynced, every CUDA step starts from the CPU's state, so each of the 10 steps'
// arithmetic (forward, backward, batchnorm, update) is held to the tolerance on its own (batchnorm biases to
// PyTorch's own pair's, below). Skipped without a GPU or without Fashion-MNIST.
#include <cmath>
#include <cstdio>
#include <string>

#include "e2e/fashion_mnist_fixture.h"
#include "fresco/core/job.h"
#include "fresco/core/parity.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

TEST(CudaParity, ResNet18EveryStepOf10ResyncedCpuVsCuda) {
  FRESCO_REQUIRE_GPU();
  FRESCO_REQUIRE_FASHION_MNIST();
  const JobSpec job = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/resnet18_parity.json");
  const ParityReport r = run_parity(job, 10, "cpu", "cuda", 320, true);
  ASSERT_EQ(r.step_worst.size(), 10u);
  // Measured on the H200 (twenty-fifth session): every tensor within 7.4e-5 but the batchnorm biases, up to
  // 2.4e-3: a bias's gradient is a sum over the batch that cancels to a small value, so its last bits are
  // relatively large; PyTorch's own CPU and CUDA runs of this job, resynced the same way, differ by 3.5e-3
  // on them (bench/device/pytorch_rn18_parity.py). So batchnorm biases are held to 1e-2, the rest to 1e-4,
  // every step's loss to 1e-6.
  auto is_bn_bias = [](const std::string& t) {
    return t.rfind("bn", 0) == 0 && t.size() > 5 && t.compare(t.size() - 5, 5, ".bias") == 0;
  };
  for (size_t s = 0; s < r.step_worst.size(); ++s) {
    std::printf("step %zu  loss %.8f / %.8f  worst weight norm rel %.3e\n", s, r.loss_a[s], r.loss_b[s],
                r.step_worst[s]);
    EXPECT_LE(r.step_worst[s], 1e-2) << "step " << s;
    EXPECT_NEAR(r.loss_b[s], r.loss_a[s], 1e-6 * std::fabs(r.loss_a[s])) << "step " << s;
  }
  for (const ParityRow& row : r.rows)
    if (parity_row_judged(row)) {
      EXPECT_LE(row.norm_rel, is_bn_bias(row.tensor) ? 1e-2 : 1e-4) << row.tensor;
    }
}
