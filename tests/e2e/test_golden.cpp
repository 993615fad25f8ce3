// Golden trajectories recorded with PyTorch (copied from ../shared/golden into tests/data/golden): the MLP
// cases and the small CNN (conv with bias, max pool, strided conv, batchnorm, GELU, average pool, C,H,W
// flatten, Adam) must reproduce every step's loss, the final weights and the eval logits within the
// manifests' tolerances.
#include <gtest/gtest.h>

#include "fresco/core/golden.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
void expect_pass(const std::string& name) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const GoldenReport r = run_golden(std::string(FRESCO_TEST_DATA_DIR) + "/golden/" + name, "cpu");
  EXPECT_TRUE(r.pass) << r.failure << ": loss rel " << r.worst_loss_rel << " (step " << r.worst_loss_step
                      << "), tensor rel " << r.worst_tensor_rel << " (" << r.worst_tensor << "), logits rel "
                      << r.logits_rel;
  EXPECT_GT(r.steps, 0);
  EXPECT_LE(r.worst_loss_rel, r.loss_tol);
  EXPECT_LE(r.worst_tensor_rel, r.tensor_tol);
  EXPECT_LE(r.logits_rel, r.logits_tol);
}
}  // namespace

TEST(Golden, MlpAdamW) {
  expect_pass("mlp_adamw");
}
TEST(Golden, MlpSgdNesterovPartialBatch) {
  expect_pass("mlp_sgd_nesterov_partial");
}
// Convolutions with bias, max pool, strided conv, batchnorm, GELU, average pool, C,H,W flatten, fc; Adam.
TEST(Golden, CnnAdamCifar) {
  expect_pass("cnn_adam_cifar");
}
