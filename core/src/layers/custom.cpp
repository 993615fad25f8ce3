// custom: a layer computed by an op that a loaded op library declares (FrOpSchema): forward node {x} -> {y}
// with the schema's op, backward node {dy, x, y} -> {dx} with its backward op. The schema is looked up when
// the model is compiled, so the library must be on the plugin search path (FRESCO_PLUGIN_PATH or an install
// folder).
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "layers/layer_rule.h"

namespace fresco::layers {

namespace {
const FrOpSchema& schema_of(const LayerDescriptor& l) {
  const FrOpSchema* s = PluginRegistry::instance().schema(l.spec.op);
  if (!s) {
    std::string known;
    for (const auto& n : PluginRegistry::instance().schema_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kBadConfig, "layer " + l.spec.path +
                                           " (custom): no loaded op library declares op '" + l.spec.op +
                                           "' (declared: " + (known.empty() ? "none" : known) +
                                           "); put its library on FRESCO_PLUGIN_PATH");
  }
  FRESCO_CHECK(s->n_in == 1 && s->n_out == 1, ErrorCode::kBadConfig,
               "layer " + l.spec.path + " (custom): op '" + l.spec.op + "' has " + std::to_string(s->n_in) +
                   " inputs and " + std::to_string(s->n_out) + " outputs; a BluePrint layer needs 1 and 1");
  FRESCO_CHECK(s->params_size == 0, ErrorCode::kBadConfig,
               "layer " + l.spec.path + " (custom): op '" + l.spec.op + "' takes " +
                   std::to_string(s->params_size) +
                   " bytes of params, which a BluePrint layer cannot give yet");
  return *s;
}
}  // namespace

class CustomRule final : public LayerRule {
 public:
  Shape out_shape(const LayerDescriptor& l, const Shape& in) const override {
    const FrOpSchema& s = schema_of(l);
    if (!s.infer_shape) return in;
    const int64_t in_dims[4] = {1, in.h, in.w, in.c};
    int64_t out_dims[4] = {1, 1, 1, 1};
    throw_if_error(s.infer_shape(in_dims, out_dims, nullptr),
                   "layer " + l.spec.path + " (" + l.spec.op + ") shape");
    const Shape out{1, out_dims[1], out_dims[2], out_dims[3]};
    FRESCO_CHECK(out.h > 0 && out.w > 0 && out.c > 0, ErrorCode::kBadConfig,
                 "layer " + l.spec.path + " (" + l.spec.op + "): the op's shape rule gave " + out.str());
    return out;
  }
  void forward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, bool) const override {
    GraphNode n = compute_node(schema_of(l).name, l.name, {x}, {y});
    cx.add(std::move(n));
  }
  void backward(EmitContext& cx, const LayerDescriptor& l, TensorId x, TensorId y, TensorId dy,
                TensorId dx) const override {
    if (dx == kNoTensor) return;
    const FrOpSchema& s = schema_of(l);
    FRESCO_CHECK(s.backward, ErrorCode::kBadConfig,
                 "layer " + l.spec.path + " (custom): op '" + l.spec.op +
                     "' declares no backward op, so the layers before it cannot be trained");
    GraphNode n = compute_node(s.backward, l.name, {dy, x, y}, {dx});
    cx.add(std::move(n));
  }
};

const LayerRule& custom_rule() {
  static const CustomRule r;
  return r;
}

}  // namespace fresco::layers
