// Standard networks as BluePrints (models.h).
#include "fresco/core/models.h"

#include <vector>

#include "fresco/core/error.h"

namespace fresco::models {

namespace {
// conv3x3-bn-relu-conv3x3-bn + shortcut, then relu.
void basic_block(std::vector<LayerSpec>& out, int64_t channels, int64_t stride, bool project) {
  std::vector<LayerSpec> main = {conv(channels, 3, stride, 1), bn(), relu(), conv(channels, 3, 1, 1), bn()};
  std::vector<LayerSpec> shortcut;
  if (project) shortcut = {conv(channels, 1, stride, 0), bn()};
  out.push_back(residual(std::move(main), std::move(shortcut)));
  out.push_back(relu());
}
}  // namespace

BluePrint resnet18(int64_t num_classes) {
  FRESCO_CHECK(num_classes > 0, ErrorCode::kBadConfig,
               "resnet18: num_classes must be positive, got " + std::to_string(num_classes));
  std::vector<LayerSpec> l = {conv(64, 3, 1, 1), bn(), relu()};
  int64_t in = 64;
  for (const int64_t c : {64, 128, 256, 512}) {
    const int64_t stride = c == 64 ? 1 : 2;
    basic_block(l, c, stride, stride != 1 || in != c);
    basic_block(l, c, 1, false);
    in = c;
  }
  l.push_back(gap());
  l.push_back(fc(num_classes));
  return BluePrint(std::move(l));
}

}  // namespace fresco::models
