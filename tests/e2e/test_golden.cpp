// Golden trajectories recorded with PyTorch (copied from ../shared/golden into tests/data/golden): the MLP
// cases and the small CNN (conv with bias, max pool, strided conv, batchnorm, GELU, average pool, C,H,W
// flatten, Adam) must reproduce every step's loss, the final weights and the eval logits within the
// manifests' tolerances.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/temp_dir.h"
#include "fresco/core/error.h"
#include "fresco/core/golden.h"
#include "fresco/core/plugin_loader.h"

using namespace fresco;

namespace {
void expect_pass(const std::string& name, int max_steps = 0) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const GoldenReport r = run_golden(std::string(FRESCO_TEST_DATA_DIR) + "/golden/" + name, "cpu", max_steps);
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

// Residual blocks (identity and projection shortcut), BN, max pool, GELU, global average pool, Nesterov SGD
// with no decay on 1-D parameters. This trajectory is chaotic: PyTorch itself, run with 2 CPU threads instead
// of the generator's 1, misses the recorded losses by 1.2e-2 at step 7, and a 1e-7 relative change of the
// initial weights moves step 7 by 8e-3 (docs/decisions.md). Step 1's loss depends on the complete step-0
// gradient through both residual blocks and on the optimizer update and is still inside float noise there
// (PyTorch 2 threads: 3.1e-5), so the first two steps are held to the manifest's 1e-4.
TEST(Golden, ResnetSgdFirstTwoSteps) {
  expect_pass("resnet_sgd", 2);
}
TEST(Golden, StepLimitMustBeValid) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  EXPECT_THROW(run_golden(std::string(FRESCO_TEST_DATA_DIR) + "/golden/resnet_sgd", "cpu", -1), Error);
}

// A manifest whose tensors lie outside data.bin, or have negative or overflowing sizes, is refused as bad
// data (it used to be read past the buffer when offset + size wrapped around).
TEST(Golden, ManifestTensorsOutsideTheFileAreRefused) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const std::string src = std::string(FRESCO_TEST_DATA_DIR) + "/golden/mlp_adamw";
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(src + "/manifest.json"));
  const uint64_t size = std::filesystem::file_size(src + "/data.bin");
  const auto data_bytes = static_cast<uint64_t>(640 * 28 * 28);
  struct Case {
    const char* tensor;
    nlohmann::json offset, shape;
  };
  const Case cases[] = {
      {"data", ~uint64_t{0} - data_bytes + 1000, {640, 28, 28, 1}},  // offset + size wraps around
      {"labels", ~uint64_t{0} - 15, {640}},
      {"data", 0, {-1, 28, 28, 1}},
      {"data", 0, {int64_t{1} << 40, int64_t{1} << 40, 28, 1}},  // the product overflows
      {"labels", size - 4, {640}},
  };
  for (const Case& c : cases) {
    fresco::test::TempDir dir;
    nlohmann::json m = manifest;
    m["tensors"][c.tensor]["offset"] = c.offset;
    m["tensors"][c.tensor]["shape"] = c.shape;
    std::ofstream(dir.file("manifest.json")) << m.dump();
    std::filesystem::copy_file(src + "/data.bin", dir.file("data.bin"));
    try {
      run_golden(dir.path().string(), "cpu");
      ADD_FAILURE() << c.tensor << " " << c.offset << " " << c.shape << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadData) << e.what();
      const std::string what = e.what();  // refused by the size checks, not an earlier one
      EXPECT_TRUE(what.find("lies beyond the end of the file") != std::string::npos ||
                  what.find("has a dimension of") != std::string::npos)
          << what;
    }
  }
}

// A tensor of the wrong rank or dtype for what reads it is refused with a message naming it (eval_logits of
// one dimension used to end in an uncaught std::out_of_range: found by scripts/fuzz_jobs.py --golden).
TEST(Golden, ManifestTensorsOfTheWrongShapeOrDtypeAreRefused) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const std::string src = std::string(FRESCO_TEST_DATA_DIR) + "/golden/mlp_adamw";
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(src + "/manifest.json"));
  struct Case {
    const char* tensor;
    const char* key;
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"eval_logits", "shape", {640}, "eval_logits must be f32 [samples, classes]"},
      {"eval_logits", "dtype", "i32", "eval_logits must be f32 [samples, classes]"},
      {"eval_logits", "shape", {0, 10}, "eval_logits must have 1 to 640 samples"},
      {"labels", "shape", {64, 10}, "labels must be i32 [samples]"},
      {"labels", "dtype", "f32", "labels must be i32 [samples]"},
      {"init/0/weight", "dtype", "u8", "tensor 'init/0/weight' must be f32"},
  };
  for (const Case& c : cases) {
    fresco::test::TempDir dir;
    nlohmann::json m = manifest;
    m["tensors"][c.tensor][c.key] = c.value;
    std::ofstream(dir.file("manifest.json")) << m.dump();
    std::filesystem::copy_file(src + "/data.bin", dir.file("data.bin"));
    try {
      run_golden(dir.path().string(), "cpu", 1);
      ADD_FAILURE() << c.tensor << " " << c.key << " " << c.value << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadData) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

// An empty tensor (a dimension of 0) is read as no values and refused by the checks of what it feeds; the
// reader copies nothing for it (an empty vector's data() may be null, which memcpy must not see: UBSan).
TEST(Golden, EmptyManifestTensorsAreRefusedByTheirReaders) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  const std::string src = std::string(FRESCO_TEST_DATA_DIR) + "/golden/mlp_adamw";
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(src + "/manifest.json"));
  for (const char* tensor : {"labels", "init/0/weight"}) {
    fresco::test::TempDir dir;
    nlohmann::json m = manifest;
    m["tensors"][tensor]["shape"] = nlohmann::json::array({0});
    std::ofstream(dir.file("manifest.json")) << m.dump();
    std::filesystem::copy_file(src + "/data.bin", dir.file("data.bin"));
    try {
      run_golden(dir.path().string(), "cpu", 1);
      ADD_FAILURE() << tensor << ": an empty tensor was accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("labels count differs") != std::string::npos ||
                  what.find("found 0") != std::string::npos)
          << tensor << ": " << what;
    }
  }
}
