// BluePrint DSL constructors and the JSON form of a model.
#include "fresco/core/blueprint.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "fresco/core/error.h"
#include "json_depth.h"

namespace fresco {

using nlohmann::json;

LayerSpec fc(int64_t out, bool bias) {
  return LayerSpec{"fc", out, bias, 0.0f, {}};
}
LayerSpec relu() {
  return LayerSpec{"relu", 0, false, 0.0f, {}};
}
LayerSpec flatten() {
  return LayerSpec{"flatten", 0, false, 0.0f, {}};
}
LayerSpec dropout(float p) {
  return LayerSpec{"dropout", 0, false, p, {}};
}
namespace {
LayerSpec make(const char* kind) {
  LayerSpec s;
  s.kind = kind;
  s.bias = false;
  return s;
}
}  // namespace
LayerSpec conv(int64_t out, int64_t k, int64_t stride, int64_t pad, bool bias) {
  LayerSpec s = make("conv");
  s.out = out, s.k = k, s.stride = stride, s.pad = pad, s.bias = bias;
  return s;
}
LayerSpec bn(float momentum, float eps) {
  LayerSpec s = make("bn");
  s.momentum = momentum, s.eps = eps;
  return s;
}
LayerSpec maxpool(int64_t k, int64_t stride, int64_t pad) {
  LayerSpec s = make("maxpool");
  s.k = k, s.stride = stride, s.pad = pad;
  return s;
}
LayerSpec avgpool(int64_t k, int64_t stride, int64_t pad) {
  LayerSpec s = make("avgpool");
  s.k = k, s.stride = stride, s.pad = pad;
  return s;
}
LayerSpec gap() {
  return make("gap");
}
LayerSpec gelu() {
  return make("gelu");
}
LayerSpec silu() {
  return make("silu");
}
LayerSpec sigmoid() {
  return make("sigmoid");
}
LayerSpec tanh() {
  return make("tanh");
}
LayerSpec residual(std::vector<LayerSpec> main, std::vector<LayerSpec> shortcut) {
  LayerSpec s = make("residual");
  s.main = std::move(main);
  s.shortcut = std::move(shortcut);
  return s;
}
std::vector<LayerSpec> cbr(int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return {conv(out, k, stride, pad < 0 ? k / 2 : pad), bn(), relu()};
}
LayerSpec concat(std::vector<LayerSpec> main, std::vector<LayerSpec> second) {
  LayerSpec s = make("concat");
  s.main = std::move(main);
  s.shortcut = std::move(second);
  return s;
}
LayerSpec custom(std::string op) {
  LayerSpec s;
  s.kind = "custom";
  s.op = std::move(op);
  return s;
}

const std::vector<std::string>& known_layer_kinds() {
  static const std::vector<std::string> kinds = {
      "fc",      "relu", "flatten", "dropout",  "custom", "conv",    "bn",   "maxpool",
      "avgpool", "gap",  "gelu",    "residual", "silu",   "sigmoid", "tanh", "concat"};
  return kinds;
}

namespace {
void assign_paths(std::vector<LayerSpec>& layers, const std::string& prefix) {
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].path = prefix + std::to_string(i);
    assign_paths(layers[i].main, layers[i].path + ".main.");
    assign_paths(layers[i].shortcut, layers[i].path + ".shortcut.");
  }
}
}  // namespace

BluePrint::BluePrint(std::vector<LayerSpec> layers) : layers_(std::move(layers)) {
  assign_paths(layers_, "");
}

BluePrint seq(std::initializer_list<LayerSpec> layers) {
  return BluePrint(std::vector<LayerSpec>(layers));
}

std::string BluePrint::describe() const {
  std::string s = "seq(";
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    if (i) s += ", ";
    s += l.kind;
    if (l.kind == "fc") s += "(" + std::to_string(l.out) + (l.bias ? "" : ", bias=false") + ")";
    if (l.kind == "dropout") s += "(" + std::to_string(l.p) + ")";
    if (l.kind == "custom") s += "(" + l.op + ")";
    if (l.kind == "residual" || l.kind == "concat")
      s += "(" + BluePrint(l.main).describe() +
           (l.shortcut.empty() ? "" : ", " + BluePrint(l.shortcut).describe()) + ")";
    auto opt = [](const char* name, int64_t v, int64_t plain) {
      return v == plain ? std::string() : std::string(", ") + name + "=" + std::to_string(v);
    };
    if (l.kind == "conv")
      s += "(" + std::to_string(l.out) + ", k=" + std::to_string(l.k) +
           (l.stride > 1 ? opt("s", l.stride, 1) : "") + opt("p", l.pad, 0) + opt("d", l.dilation, 1) +
           opt("g", l.groups, 1) + (l.bias ? ", bias" : "") + ")";
    if (l.kind == "maxpool" || l.kind == "avgpool")
      s += "(" + std::to_string(l.k) + (l.stride > 0 && l.stride != l.k ? opt("s", l.stride, 0) : "") +
           opt("p", l.pad, 0) + ")";
    if (l.kind == "bn" && (l.momentum != LayerSpec{}.momentum || l.eps != LayerSpec{}.eps)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "(momentum=%g, eps=%g)", static_cast<double>(l.momentum),
                    static_cast<double>(l.eps));
      s += buf;
    }
  }
  return s + ")";
}

namespace {
std::string known_list() {
  std::string s;
  for (const auto& k : known_layer_kinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}
}  // namespace

namespace {
// The fields a layer kind takes besides "layer", for error messages.
std::string fields_of(const std::string& kind) {
  if (kind == "fc") return "out, bias";
  if (kind == "dropout") return "p";
  if (kind == "conv") return "out, k, stride, pad, dilation, groups, bias";
  if (kind == "maxpool" || kind == "avgpool") return "k, stride, pad";
  if (kind == "bn") return "momentum, eps";
  if (kind == "residual" || kind == "concat") return "main, shortcut";
  if (kind == "custom") return "op";
  return "";
}

// Residual and concat blocks nest their branches; deeper nesting than this is refused rather than recursed
// into (a 60 KB file of nested blocks would take gigabytes to describe and plan).
constexpr int kMaxNesting = 64;

std::vector<LayerSpec> parse_list(const json& j, const std::string& source, const std::string& list_name,
                                  int depth = 0) {
  FRESCO_CHECK(
      depth <= kMaxNesting, ErrorCode::kBadConfig,
      source + ": " + list_name + ": blocks nested more than " + std::to_string(kMaxNesting) + " deep");
  FRESCO_CHECK(
      j.is_array(), ErrorCode::kBadConfig,
      source + ": " + list_name + ": expected a JSON array of layers, found " + std::string(j.type_name()));
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& l = j[i];
    const std::string where = source + ": " + list_name + " layer " + std::to_string(i);
    FRESCO_CHECK(l.is_object() && l.contains("layer") && l["layer"].is_string(), ErrorCode::kBadConfig,
                 where + ": expected an object with a string field \"layer\"");
    LayerSpec s;
    s.kind = l["layer"].get<std::string>();
    if (s.kind != "fc") s.bias = false;  // fc has a bias by default; conv only when asked
    const auto& kinds = known_layer_kinds();
    FRESCO_CHECK(std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end(), ErrorCode::kBadConfig,
                 where + ": unknown layer \"" + s.kind + "\" (known: " + known_list() + ")");
    for (const auto& [key, value] : l.items()) {
      if (key == "layer") continue;
      if (s.kind == "fc" && key == "out") {
        FRESCO_CHECK(value.is_number_integer(), ErrorCode::kBadConfig,
                     where + " (fc): field \"out\" must be an integer, found " + value.dump());
        s.out = value.get<int64_t>();
        FRESCO_CHECK(s.out > 0, ErrorCode::kBadConfig,
                     where + " (fc): field \"out\" must be positive, found " + std::to_string(s.out));
        FRESCO_CHECK(s.out <= (int64_t{1} << 24), ErrorCode::kBadConfig,
                     where + " (fc): field \"out\" is absurdly large: " + std::to_string(s.out));
      } else if (s.kind == "fc" && key == "bias") {
        FRESCO_CHECK(value.is_boolean(), ErrorCode::kBadConfig,
                     where + " (fc): field \"bias\" must be true/false");
        s.bias = value.get<bool>();
      } else if (s.kind == "dropout" && key == "p") {
        FRESCO_CHECK(value.is_number(), ErrorCode::kBadConfig,
                     where + " (dropout): field \"p\" must be a number");
        s.p = value.get<float>();
        FRESCO_CHECK(s.p >= 0.0f && s.p < 1.0f, ErrorCode::kBadConfig,
                     where + " (dropout): \"p\" must be in [0, 1), found " + std::to_string(s.p));
      } else if ((s.kind == "conv" && (key == "out" || key == "k" || key == "stride" || key == "pad" ||
                                       key == "dilation" || key == "groups")) ||
                 ((s.kind == "maxpool" || s.kind == "avgpool") &&
                  (key == "k" || key == "stride" || key == "pad"))) {
        FRESCO_CHECK(
            value.is_number_integer(), ErrorCode::kBadConfig,
            where + " (" + s.kind + "): field \"" + key + "\" must be an integer, found " + value.dump());
        const int64_t v = value.get<int64_t>();
        const bool may_be_zero = key == "pad" || key == "stride";  // stride 0: the default (1, a pool's k)
        FRESCO_CHECK(
            v >= (may_be_zero ? 0 : 1) && v <= (int64_t{1} << 20), ErrorCode::kBadConfig,
            where + " (" + s.kind + "): field \"" + key + "\" out of range, found " + std::to_string(v));
        (key == "out"        ? s.out
         : key == "k"        ? s.k
         : key == "stride"   ? s.stride
         : key == "pad"      ? s.pad
         : key == "dilation" ? s.dilation
                             : s.groups) = v;
      } else if (s.kind == "conv" && key == "bias") {
        FRESCO_CHECK(value.is_boolean(), ErrorCode::kBadConfig,
                     where + " (conv): field \"bias\" must be true/false");
        s.bias = value.get<bool>();
      } else if ((s.kind == "residual" || s.kind == "concat") && (key == "main" || key == "shortcut")) {
        (key == "main" ? s.main : s.shortcut) =
            parse_list(value, source, list_name + " layer " + std::to_string(i) + " " + key, depth + 1);
      } else if (s.kind == "bn" && (key == "momentum" || key == "eps")) {  // ranges: checked at compile
        FRESCO_CHECK(value.is_number(), ErrorCode::kBadConfig,
                     where + " (bn): field \"" + key + "\" must be a number, found " + value.dump());
        (key == "momentum" ? s.momentum : s.eps) = value.get<float>();
      } else if (s.kind == "custom" && key == "op") {
        FRESCO_CHECK(value.is_string() && !value.get<std::string>().empty(), ErrorCode::kBadConfig,
                     where + " (custom): field \"op\" must be a non-empty string");
        s.op = value.get<std::string>();
      } else {
        const std::string fields = fields_of(s.kind);
        throw Error(ErrorCode::kBadConfig, where + " (" + s.kind + "): unknown field \"" + key + "\" (" +
                                               (fields.empty() ? "it takes none" : "it takes " + fields) +
                                               ")");
      }
    }
    FRESCO_CHECK(s.kind != "fc" || l.contains("out"), ErrorCode::kBadConfig,
                 where + " (fc): missing field \"out\"");
    FRESCO_CHECK(s.kind != "conv" || (l.contains("out") && l.contains("k")), ErrorCode::kBadConfig,
                 where + " (conv): fields \"out\" and \"k\" are required");
    FRESCO_CHECK((s.kind != "maxpool" && s.kind != "avgpool") || l.contains("k"), ErrorCode::kBadConfig,
                 where + " (" + s.kind + "): field \"k\" is required");
    FRESCO_CHECK(s.kind != "custom" || !s.op.empty(), ErrorCode::kBadConfig,
                 where + " (custom): missing field \"op\"");
    FRESCO_CHECK((s.kind != "residual" && s.kind != "concat") || !s.main.empty(), ErrorCode::kBadConfig,
                 where + " (" + s.kind + "): the \"main\" branch needs at least one layer");
    layers.push_back(s);
  }
  return layers;
}
}  // namespace

BluePrint BluePrint::from_json(const std::string& json_text, const std::string& source) {
  check_json_depth(json_text, source);
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kBadConfig, source + ": model is not valid JSON: " + e.what());
  }
  FRESCO_CHECK(j.is_array(), ErrorCode::kBadConfig,
               source + ": model: expected a JSON array of layers, found " + std::string(j.type_name()));
  return BluePrint(parse_list(j, source, "model"));
}

}  // namespace fresco
