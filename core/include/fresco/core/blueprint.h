// BluePrint: the model DSL. seq(fc(1024), relu(), dropout(0.1), fc(10)) or the same list as JSON
// ([{"layer":"fc","out":1024}, {"layer":"relu"}, ...], the format of the golden manifests).
// Invariant: a BluePrint is only a description; every check of widths and kinds happens in from_json()
// (syntax) and in the Compiler (semantics), each naming the layer. Tested by test_blueprint.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace fresco {

struct LayerSpec {
  std::string kind;  // "fc", "relu", "flatten", "dropout", "custom"
  int64_t out = 0;   // fc: output features
  bool bias = true;  // fc
  float p = 0.0f;    // dropout probability
  std::string op;    // custom: the op's name in a loaded op library (FrOpSchema)
  // conv, maxpool, avgpool: window and geometry (stride 0 = the window size for pools, 1 for conv)
  int64_t k = 0, stride = 0, pad = 0, dilation = 1, groups = 1;
  float momentum = 0.1f,
        eps = 1e-5f;  // bn: PyTorch BatchNorm2d's (running = (1 - momentum) running + momentum batch)
  std::vector<LayerSpec> main, shortcut;  // residual: output = main(x) + shortcut(x) (identity when empty)
  std::string path;  // position in the model list ("0", "3", "3.main.0"), set by BluePrint
};

LayerSpec fc(int64_t out, bool bias = true);
LayerSpec relu();
LayerSpec flatten();
LayerSpec dropout(float p);
// A layer computed by a custom op that a loaded op library declares (sdk/examples,
// docs/writing-an-op-plugin.md).
LayerSpec custom(std::string op);
// Convolutional-network layers (NHWC). conv has no bias unless asked (PyTorch's ResNet convention).
LayerSpec conv(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0, bool bias = false);
// PyTorch's BatchNorm2d(momentum, eps): momentum in [0, 1] (None, the cumulative average, is not offered),
// eps > 0.
LayerSpec bn(float momentum = 0.1f, float eps = 1e-5f);
LayerSpec maxpool(int64_t k, int64_t stride = 0, int64_t pad = 0);
LayerSpec avgpool(int64_t k, int64_t stride = 0, int64_t pad = 0);
LayerSpec gap();
LayerSpec gelu();
LayerSpec silu();
LayerSpec sigmoid();
LayerSpec tanh();
// A residual block: main(x) + shortcut(x); an empty shortcut is the identity.
LayerSpec residual(std::vector<LayerSpec> main, std::vector<LayerSpec> shortcut = {});
// A concat block: main(x) and second(x) (x itself when empty) joined over channels, main's first (same height
// and width required). JSON: {"layer": "concat", "main": [...], "shortcut": [...]}.
LayerSpec concat(std::vector<LayerSpec> main, std::vector<LayerSpec> second = {});
// conv-bn-relu, the usual three layers as one call (the relu is fused into the batchnorm by the compiler).
std::vector<LayerSpec> cbr(int64_t out, int64_t k, int64_t stride = 1, int64_t pad = -1);

class BluePrint {
 public:
  BluePrint() = default;
  explicit BluePrint(std::vector<LayerSpec> layers);
  const std::vector<LayerSpec>& layers() const noexcept { return layers_; }
  bool empty() const noexcept { return layers_.empty(); }
  std::string describe() const;
  // Parses a JSON array of layer objects. `source` names the file for error messages. Unknown layers or
  // fields, wrong types and non-positive widths are errors (ErrorCode::kBadConfig) naming the layer index and
  // field.
  static BluePrint from_json(const std::string& json_text, const std::string& source);

 private:
  std::vector<LayerSpec> layers_;
};

BluePrint seq(std::initializer_list<LayerSpec> layers);

// The layer kinds this build knows (for messages).
const std::vector<std::string>& known_layer_kinds();

}  // namespace fresco
