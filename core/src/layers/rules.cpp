// The explicit table of layer rules (no static-initialiser registry).
#include "fresco/core/error.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

const LayerRule& fc_rule();
const LayerRule& relu_rule();
const LayerRule& dropout_rule();
const LayerRule& flatten_rule();
const LayerRule& custom_rule();
const LayerRule& conv_rule();
const LayerRule& batchnorm_rule();
const LayerRule& maxpool_rule();
const LayerRule& avgpool_rule();
const LayerRule& gap_rule();
const LayerRule& gelu_rule();
const LayerRule& add_rule();
const LayerRule& silu_rule();
const LayerRule& sigmoid_rule();
const LayerRule& tanh_rule();
const LayerRule& cast_rule();

const LayerRule& rule_for(LayerKind kind) {
  switch (kind) {
    case LayerKind::FC:
      return fc_rule();
    case LayerKind::RELU:
      return relu_rule();
    case LayerKind::DROPOUT:
      return dropout_rule();
    case LayerKind::FLATTEN:
      return flatten_rule();
    case LayerKind::CUSTOM:
      return custom_rule();
    case LayerKind::CONV:
      return conv_rule();
    case LayerKind::BN:
      return batchnorm_rule();
    case LayerKind::MAXPOOL:
      return maxpool_rule();
    case LayerKind::AVGPOOL:
      return avgpool_rule();
    case LayerKind::GAP:
      return gap_rule();
    case LayerKind::GELU:
      return gelu_rule();
    case LayerKind::ADD:
      return add_rule();
    case LayerKind::SILU:
      return silu_rule();
    case LayerKind::SIGMOID:
      return sigmoid_rule();
    case LayerKind::TANH:
      return tanh_rule();
    case LayerKind::CAST:
      return cast_rule();
    case LayerKind::CONCAT:
      return add_rule();  // a two-input join too: the compiler emits its nodes
  }
  throw Error(ErrorCode::kInternal, "no rule for layer kind " + std::to_string(static_cast<int>(kind)));
}

LayerKind layer_kind_of(const std::string& kind, const std::string& where) {
  if (kind == "fc") return LayerKind::FC;
  if (kind == "relu") return LayerKind::RELU;
  if (kind == "dropout") return LayerKind::DROPOUT;
  if (kind == "flatten") return LayerKind::FLATTEN;
  if (kind == "custom") return LayerKind::CUSTOM;
  if (kind == "conv") return LayerKind::CONV;
  if (kind == "bn") return LayerKind::BN;
  if (kind == "maxpool") return LayerKind::MAXPOOL;
  if (kind == "avgpool") return LayerKind::AVGPOOL;
  if (kind == "gap") return LayerKind::GAP;
  if (kind == "gelu") return LayerKind::GELU;
  if (kind == "silu") return LayerKind::SILU;
  if (kind == "sigmoid") return LayerKind::SIGMOID;
  if (kind == "tanh") return LayerKind::TANH;
  throw Error(ErrorCode::kBadConfig, where + ": unknown layer \"" + kind + "\"");
}

}  // namespace fresco::layers
