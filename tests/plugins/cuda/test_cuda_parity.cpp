// CPU vs CUDA parity of ResNet-18 in fp32 (jobs/resnet18_parity.json: CIFAR stem on Fashion-MNIST, batch 32,
// SGD Nesterov, label smoothing). Free-running, the two trajectories separate after the first step as
// PyTorch's own CPU and CUDA runs of this job do (a relu mask flipped by one rounding, then amplified;
// docs/decisions.md); resynced, every CUDA step starts from the CPU's state, so each of the 10 steps'
// arithmetic (forward, backward, batchnorm, update) is held to the tolerance on its own. Skipped without a
// GPU.
#include <cstdio>
#include <string>

#include "fresco/core/job.h"
#include "fresco/core/parity.h"
#include "plugins/cuda/gpu_fixture.h"

using namespace fresco;

TEST(CudaParity, ResNet18EveryStepOf10ResyncedCpuVsCuda) {
  FRESCO_REQUIRE_GPU();
  const JobSpec job = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/resnet18_parity.json");
  const ParityReport r = run_parity(job, 10, "cpu", "cuda", 320, true);
  ASSERT_EQ(r.step_worst.size(), 10u);
  for (size_t s = 0; s < r.step_worst.size(); ++s) {
    std::printf("step %zu  loss %.8f / %.8f  worst weight norm rel %.3e\n", s, r.loss_a[s], r.loss_b[s],
                r.step_worst[s]);
    EXPECT_LE(r.step_worst[s], 1e-4) << "step " << s;
  }
  for (const ParityRow& row : r.rows)
    if (parity_row_judged(row)) {
      EXPECT_LE(row.norm_rel, 1e-4) << row.tensor;
    }
}
