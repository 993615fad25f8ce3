// Standard networks as BluePrints (models.h).
#include "fresco/core/models.h"

#include <string>
#include <utility>

#include "fresco/core/error.h"

namespace fresco::models {

namespace {
void check_positive(int64_t v, const char* what, const char* fn) {
  FRESCO_CHECK(v > 0, ErrorCode::kBadConfig,
               std::string(fn) + ": " + what + " must be positive, got " + std::to_string(v));
}

std::vector<LayerSpec> block(std::vector<LayerSpec> main, bool project, int64_t out, int64_t stride) {
  std::vector<LayerSpec> shortcut;
  if (project) shortcut = {conv(out, 1, stride, 0), bn()};
  return {residual(std::move(main), std::move(shortcut)), relu()};
}

enum class Block { BASIC, BOTTLENECK };

BluePrint resnet(const char* name, Block kind, const int (&blocks)[4], int64_t num_classes, Stem stem) {
  check_positive(num_classes, "num_classes", name);
  std::vector<LayerSpec> l;
  if (stem == Stem::CIFAR) {
    l = {conv(64, 3, 1, 1), bn(), relu()};
  } else {
    l = {conv(64, 7, 2, 3), bn(), relu(), maxpool(3, 2, 1)};
  }
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      const std::vector<LayerSpec> blk =
          kind == Block::BASIC ? basic_block(in, widths[s], stride) : bottleneck(in, widths[s], stride);
      l.insert(l.end(), blk.begin(), blk.end());
      in = kind == Block::BASIC ? widths[s] : 4 * widths[s];
    }
  }
  l.push_back(gap());
  l.push_back(fc(num_classes));
  return BluePrint(std::move(l));
}
}  // namespace

std::vector<LayerSpec> basic_block(int64_t in, int64_t out, int64_t stride) {
  check_positive(in, "in", "basic_block");
  check_positive(out, "out", "basic_block");
  check_positive(stride, "stride", "basic_block");
  return block({conv(out, 3, stride, 1), bn(), relu(), conv(out, 3, 1, 1), bn()}, stride != 1 || in != out,
               out, stride);
}

std::vector<LayerSpec> bottleneck(int64_t in, int64_t width, int64_t stride) {
  check_positive(in, "in", "bottleneck");
  check_positive(width, "width", "bottleneck");
  check_positive(stride, "stride", "bottleneck");
  const int64_t out = 4 * width;
  return block(
      {conv(width, 1, 1, 0), bn(), relu(), conv(width, 3, stride, 1), bn(), relu(), conv(out, 1, 1, 0), bn()},
      stride != 1 || in != out, out, stride);
}

BluePrint resnet18(int64_t num_classes, Stem stem) {
  return resnet("resnet18", Block::BASIC, {2, 2, 2, 2}, num_classes, stem);
}
BluePrint resnet34(int64_t num_classes, Stem stem) {
  return resnet("resnet34", Block::BASIC, {3, 4, 6, 3}, num_classes, stem);
}
BluePrint resnet50(int64_t num_classes, Stem stem) {
  return resnet("resnet50", Block::BOTTLENECK, {3, 4, 6, 3}, num_classes, stem);
}

BluePrint small_resnet(int64_t num_classes) {
  check_positive(num_classes, "num_classes", "small_resnet");
  std::vector<LayerSpec> l = {conv(32, 3, 1, 1), bn(), relu()};
  int64_t in = 32;
  for (const auto& [width, stride] : {std::pair<int64_t, int64_t>{32, 1}, {64, 2}, {128, 2}})
    for (int b = 0; b < 2; ++b) {
      const std::vector<LayerSpec> blk = basic_block(in, width, b == 0 ? stride : 1);
      l.insert(l.end(), blk.begin(), blk.end());
      in = width;
    }
  l.push_back(gap());
  l.push_back(fc(num_classes));
  return BluePrint(std::move(l));
}

}  // namespace fresco::models
