// Ready-made BluePrints of standard networks, built from the same layer functions a user writes.
#pragma once

#include <cstdint>

#include "fresco/core/blueprint.h"

namespace fresco::models {

// ResNet-18 for 32x32 images (CIFAR form, He et al. 2016 sect. 4.2 stem): conv3x3(64)-bn-relu, four stages of
// two BasicBlocks with 64, 128, 256 and 512 channels (the first block of stages 2-4 has stride 2 and a 1x1
// conv + bn projection shortcut), global average pool, fc(num_classes). Convolutions have no bias.
BluePrint resnet18(int64_t num_classes = 10);

}  // namespace fresco::models
