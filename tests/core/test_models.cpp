// Built-in networks (models.h): the builders compile (shapes agree through every residual block) and their
// trainable parameter counts equal torchvision's for the same architectures, which pins every layer's width,
// kernel, stride and shortcut; bad arguments are one kBadConfig error.
#include <gtest/gtest.h>

#include <string>

#include "fresco/core/compiler.h"
#include "fresco/core/error.h"
#include "fresco/core/models.h"
#include "small_compile_options.h"

using namespace fresco;

namespace {
int64_t parameters(const BluePrint& bp, int64_t hw, int32_t classes) {
  CompileOptions o = test::rgb_compile_options(hw, 2);
  o.num_classes = classes;
  Compiler c;
  return c.compile(bp, o).arch.parameter_count;
}
}  // namespace

TEST(Models, ParameterCountsMatchTorchvision) {
  using models::Stem;
  // torchvision.models.resnet18/34/50(num_classes=1000): sum(p.numel() for p in m.parameters()).
  EXPECT_EQ(parameters(models::resnet18(1000, Stem::IMAGENET), 224, 1000), 11689512);
  EXPECT_EQ(parameters(models::resnet34(1000, Stem::IMAGENET), 224, 1000), 21797672);
  EXPECT_EQ(parameters(models::resnet50(1000, Stem::IMAGENET), 224, 1000), 25557032);
  // CIFAR stem (3x3 conv, no max pool) and 10 classes: 11689512 - 9408 + 1728 - 513000 + 5130.
  EXPECT_EQ(parameters(models::resnet18(10), 32, 10), 11173962);
}

TEST(Models, BlocksChooseTheirShortcut) {
  EXPECT_TRUE(models::basic_block(64, 64, 1)[0].shortcut.empty());
  EXPECT_EQ(models::basic_block(64, 128, 2)[0].shortcut.size(), 2u);
  EXPECT_EQ(models::basic_block(64, 128, 2)[1].kind, "relu");
  const auto b = models::bottleneck(256, 64, 1);
  EXPECT_TRUE(b[0].shortcut.empty());  // in == 4 * width
  EXPECT_EQ(b[0].main.size(), 8u);
  EXPECT_EQ(b[0].main[3].stride, 1);
  EXPECT_EQ(models::bottleneck(256, 128, 2)[0].main[3].stride, 2);  // v1.5: stride on the 3x3
  EXPECT_EQ(models::bottleneck(64, 64, 1)[0].shortcut.size(), 2u);  // 64 -> 256 needs a projection
}

TEST(Models, RejectBadArguments) {
  for (const auto& f : {+[] { models::resnet18(0); }, +[] { models::basic_block(64, 0, 1); },
                        +[] { models::bottleneck(64, 64, 0); }}) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      EXPECT_NE(std::string(e.what()).find("must be positive"), std::string::npos) << e.what();
    }
  }
}
