// Ready-made BluePrints of standard networks, built from the same layer functions a user writes.
#pragma once

#include <cstdint>
#include <vector>

#include "fresco/core/blueprint.h"

namespace fresco::models {

// CIFAR: conv3x3(64)-bn-relu, for 32x32 inputs (He et al. 2016, sect. 4.2). IMAGENET: conv7x7(64, stride 2,
// pad 3)-bn-relu-maxpool(3, stride 2, pad 1), for 224x224 inputs (torchvision's stem).
enum class Stem { CIFAR, IMAGENET };

// ResNet BasicBlock: residual(conv3x3(out, stride)-bn-relu-conv3x3(out)-bn, shortcut) followed by relu. The
// shortcut is identity when stride is 1 and in == out, else conv1x1(out, stride)-bn. Returns the two layers.
std::vector<LayerSpec> basic_block(int64_t in, int64_t out, int64_t stride);
// ResNet v1.5 Bottleneck (stride on the 3x3): residual(conv1x1(width)-bn-relu-conv3x3(width, stride)-bn-relu-
// conv1x1(4 width)-bn, shortcut) followed by relu; projection shortcut when stride != 1 or in != 4 width.
std::vector<LayerSpec> bottleneck(int64_t in, int64_t width, int64_t stride);

// ResNet-18/34 (BasicBlocks, stages of 2-2-2-2 / 3-4-6-3) and ResNet-50 (Bottlenecks, 3-4-6-3) with 64, 128,
// 256, 512 base widths, the first block of stages 2-4 with stride 2, then global average pool and
// fc(num_classes). Convolutions have no bias. Parameter counts match torchvision's models (resnet18:
// 11,689,512 with the ImageNet stem and 1000 classes).
BluePrint resnet18(int64_t num_classes = 10, Stem stem = Stem::CIFAR);
BluePrint resnet34(int64_t num_classes = 10, Stem stem = Stem::CIFAR);
BluePrint resnet50(int64_t num_classes = 10, Stem stem = Stem::CIFAR);

// The small ResNet of the mixed-precision acceptance run (Fashion-MNIST, 28x28x1): conv3x3(32)-bn-relu, then
// two BasicBlocks at each of the widths 32, 64 (first block stride 2) and 128 (first block stride 2), global
// average pool, fc(num_classes).
BluePrint small_resnet(int64_t num_classes = 10);

}  // namespace fresco::models
