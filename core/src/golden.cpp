// Golden replay: manifest parsing, data.bin tensors, training with the recorded lrs, comparisons.
#include "fresco/core/golden.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/log.h"

namespace fresco {

using nlohmann::json;

namespace {
struct BinTensor {
  std::vector<int64_t> shape;
  std::string dtype;
  uint64_t offset = 0;
};

std::string read_file(const std::string& path, ErrorCode missing) {
  std::ifstream f(path, std::ios::binary);
  FRESCO_CHECK(f.good(), missing, path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The manifest's name of the dtype slice<T> reads.
template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  if constexpr (std::is_same_v<T, int32_t>) return "i32";
  return "u8";
}

template <class T>
std::vector<T> slice(const std::string& bin, const BinTensor& t, const std::string& name,
                     const std::string& file) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t> || std::is_same_v<T, uint8_t>);
  FRESCO_CHECK(
      t.dtype == dtype_name<T>(), ErrorCode::kBadData,
      file + ": tensor '" + name + "' must be " + dtype_name<T>() + " (the manifest says " + t.dtype + ")");
  // Every size is checked before it is multiplied: a manifest names any numbers it likes.
  uint64_t count = 1;
  for (int64_t d : t.shape) {
    FRESCO_CHECK(
        d >= 0 && (d == 0 || count <= bin.size() / sizeof(T) / static_cast<uint64_t>(d)), ErrorCode::kBadData,
        file + ": tensor '" + name + "' has a dimension of " + std::to_string(d) +
            (d < 0 ? "" : ", more values than the file's " + std::to_string(bin.size()) + " bytes hold"));
    count *= static_cast<uint64_t>(d);
  }
  const uint64_t bytes = count * sizeof(T);
  FRESCO_CHECK(t.offset <= bin.size() && bytes <= bin.size() - t.offset, ErrorCode::kBadData,
               file + ": tensor '" + name + "' of " + std::to_string(bytes) + " bytes at offset " +
                   std::to_string(t.offset) + " lies beyond the end of the file (" +
                   std::to_string(bin.size()) + " bytes)");
  std::vector<T> v(static_cast<size_t>(count));
  if (bytes) std::memcpy(v.data(), bin.data() + t.offset, bytes);  // an empty vector's data() may be null
  return v;
}

double rel_norm(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
}  // namespace

GoldenReport run_golden(const std::string& dir, const std::string& device, int max_steps) {
  const std::string mpath = dir + "/manifest.json", bpath = dir + "/data.bin";
  FRESCO_CHECK(std::filesystem::is_directory(dir), ErrorCode::kMissingInput,
               dir + ": not a golden case directory");
  if (!std::filesystem::exists(mpath)) {  // a folder of cases given instead of the cases themselves?
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (std::filesystem::exists(e.path() / "manifest.json"))
        found.push_back((std::filesystem::path(dir) / e.path().filename()).string());
    std::sort(found.begin(), found.end());
    std::string cases;
    for (const auto& c : found) cases += (cases.empty() ? "" : " ") + c;
    FRESCO_CHECK(cases.empty(), ErrorCode::kMissingInput,
                 dir + " is not a golden case (no manifest.json) but holds cases; pass them: " + cases);
  }
  json m;
  try {
    m = json::parse(read_file(mpath, ErrorCode::kMissingInput));
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kBadData, mpath + ": not valid JSON: " + e.what());
  }
  const std::string bin = read_file(bpath, ErrorCode::kMissingInput);
  GoldenReport rep;
  try {
    rep.name = m.at("name").get<std::string>();
    const json& tol = m.at("tolerance");
    rep.loss_tol = tol.at("loss_rel").get<double>();
    rep.tensor_tol = tol.at("weight_rel_norm").get<double>();
    rep.logits_tol = tol.at("eval_logits_rel_norm").get<double>();
    std::map<std::string, BinTensor> tensors;
    for (const auto& [k, v] : m.at("tensors").items())
      tensors[k] = BinTensor{v.at("shape").get<std::vector<int64_t>>(), v.at("dtype").get<std::string>(),
                             v.at("offset").get<uint64_t>()};
    for (const char* need : {"data", "labels", "eval_logits"})
      FRESCO_CHECK(tensors.count(need), ErrorCode::kBadData,
                   mpath + ": tensors has no '" + std::string(need) + "'");
    BluePrint bp;
    try {
      bp = BluePrint::from_json(m.at("model").dump(), mpath);
    } catch (const Error& e) {
      rep.failure = std::string("model not supported by this build: ") + e.what();
      return rep;
    }
    // Data: uint8 NHWC images and int32 labels; the eval set is the first 64 samples.
    const BinTensor& dt = tensors["data"];
    FRESCO_CHECK(dt.shape.size() == 4 && dt.dtype == "u8", ErrorCode::kBadData,
                 mpath + ": data must be u8 NHWC");
    data::Dataset train;
    train.name = rep.name;
    train.n = dt.shape[0], train.h = dt.shape[1], train.w = dt.shape[2], train.c = dt.shape[3];
    train.images = slice<uint8_t>(bin, dt, "data", bpath);
    const BinTensor &lt = tensors["labels"], &et = tensors["eval_logits"];
    FRESCO_CHECK(lt.shape.size() == 1 && lt.dtype == "i32", ErrorCode::kBadData,
                 mpath + ": labels must be i32 [samples]");
    train.labels = slice<int32_t>(bin, lt, "labels", bpath);
    FRESCO_CHECK(static_cast<int64_t>(train.labels.size()) == train.n, ErrorCode::kBadData,
                 mpath + ": labels count differs from data count");
    FRESCO_CHECK(et.shape.size() == 2 && et.dtype == "f32", ErrorCode::kBadData,
                 mpath + ": eval_logits must be f32 [samples, classes]");
    const std::vector<float> want_logits = slice<float>(bin, et, "eval_logits", bpath);
    const int64_t n_eval = et.shape[0];
    FRESCO_CHECK(n_eval >= 1 && n_eval <= train.n && et.shape[1] >= 1 && et.shape[1] <= INT32_MAX,
                 ErrorCode::kBadData,
                 mpath + ": eval_logits must have 1 to " + std::to_string(train.n) +
                     " samples (the first ones of data) and at least one class");
    train.num_classes = static_cast<int32_t>(et.shape[1]);
    data::Dataset test = train;
    test.n = n_eval;
    test.images.resize(static_cast<size_t>(n_eval * train.sample_bytes()));
    test.labels.resize(static_cast<size_t>(n_eval));

    const json& in = m.at("input");
    Normalization norm;
    norm.mean = in.at("normalize").at("mean").get<std::vector<float>>();
    norm.std = in.at("normalize").at("std").get<std::vector<float>>();
    const json& lj = m.at("loss");
    FRESCO_CHECK(lj.at("type").get<std::string>() == "cross_entropy_mean", ErrorCode::kBadData,
                 mpath + ": loss type " + lj.at("type").dump() + " is not cross_entropy_mean");
    CrossEntropyLoss loss;
    loss.smoothing = lj.value("label_smoothing", 0.0f);
    const json& oj = m.at("optimizer");
    const std::string ot = oj.at("type").get<std::string>();
    Optimizer opt = ot == "sgd" ? SGD() : ot == "adam" ? Adam() : AdamW();
    FRESCO_CHECK(ot == "sgd" || ot == "adam" || ot == "adamw", ErrorCode::kBadData,
                 mpath + ": optimizer " + ot);
    opt.lr = oj.at("lr").get<float>();
    opt.weight_decay = oj.value("weight_decay", ot == "adamw" ? 0.01f : 0.0f);
    opt.momentum = oj.value("momentum", 0.0f);
    opt.nesterov = oj.value("nesterov", false);
    opt.no_decay_1d = oj.value("no_decay_1d", false);
    if (oj.contains("betas")) {
      opt.beta1 = oj["betas"].at(0).get<float>();
      opt.beta2 = oj["betas"].at(1).get<float>();
    }
    opt.eps = oj.value("eps", 1e-8f);
    const std::vector<float> lrs = m.at("lr_per_step").get<std::vector<float>>();
    const std::vector<double> losses = m.at("losses").get<std::vector<double>>();
    const std::vector<int64_t> sizes = m.at("batch_sizes").get<std::vector<int64_t>>();
    const int64_t batch = m.at("batch").get<int64_t>();
    rep.steps = m.at("steps").get<int>();
    FRESCO_CHECK(static_cast<int>(lrs.size()) == rep.steps && static_cast<int>(losses.size()) == rep.steps &&
                     static_cast<int>(sizes.size()) == rep.steps,
                 ErrorCode::kBadData,
                 mpath + ": lr_per_step, losses and batch_sizes must have `steps` entries");
    rep.recorded_steps = rep.steps;
    FRESCO_CHECK(max_steps >= 0, ErrorCode::kUsage,
                 "golden: --steps must be 0 (all) or positive (got " + std::to_string(max_steps) + ")");
    if (max_steps > rep.steps)
      log().warn("golden {}: --steps {} is more than the {} steps recorded; replaying all of them", rep.name,
                 max_steps, rep.steps);
    if (max_steps > 0) rep.steps = std::min(rep.steps, max_steps);

    DeepLearningTask task;
    task.model(bp)
        .data(train, test)
        .normalize(norm)
        .batch_size(batch)
        .val_batch_size(n_eval)
        .epochs(1)
        .loss(loss)
        .optimizer(opt)
        .scheduler(TableLR(lrs))
        .device(device)
        .shuffle(false);
    task.compile();
    auto load = [&](const std::string& prefix, bool write, const std::string& which) {
      double worst = 0;
      for (const auto& [name, t] : tensors) {
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string rest = name.substr(prefix.size());
        const size_t slash = rest.rfind('/');
        const std::string path = rest.substr(0, slash), param = rest.substr(slash + 1);
        const int32_t layer = task.layer_index(path);
        const std::vector<float> v = slice<float>(bin, t, name, bpath);
        if (write) {
          task.write_param(layer, param, v);
        } else {
          const double r = rel_norm(task.read_param(layer, param), v);
          if (r >= worst) {
            worst = r;
            rep.worst_tensor = name;
          }
        }
      }
      (void)which;
      return worst;
    };
    load("init/", true, "init");
    const int64_t n = train.n;
    const int64_t passes = (n + batch - 1) / batch;
    std::vector<uint32_t> idx;
    for (int s = 0; s < rep.steps; ++s) {
      const int64_t i = s % passes;
      const int64_t b0 = i * batch, b1 = std::min(n, (i + 1) * batch);
      FRESCO_CHECK(b1 - b0 == sizes[static_cast<size_t>(s)], ErrorCode::kBadData,
                   mpath + ": step " + std::to_string(s) + " batch size " +
                       std::to_string(sizes[static_cast<size_t>(s)]) + " does not follow the batch rule (" +
                       std::to_string(b1 - b0) + ")");
      idx.resize(static_cast<size_t>(b1 - b0));
      for (int64_t k = b0; k < b1; ++k) idx[static_cast<size_t>(k - b0)] = static_cast<uint32_t>(k);
      const float got = task.train_step(idx.data(), b1 - b0);
      const double want = losses[static_cast<size_t>(s)];
      const double r = std::fabs(got - want) / std::max(1e-12, std::fabs(want));
      if (r >= rep.worst_loss_rel) rep.worst_loss_rel = r, rep.worst_loss_step = s;
    }
    if (rep.steps == rep.recorded_steps) {
      rep.worst_tensor_rel = load("final/", false, "final");
      rep.logits_rel = rel_norm(task.test_logits(n_eval), want_logits);
    } else {
      rep.worst_tensor = "not compared: replay stopped after " + std::to_string(rep.steps) + " of " +
                         std::to_string(rep.recorded_steps) + " steps";
    }
  } catch (const json::exception& e) {
    throw Error(ErrorCode::kBadData, mpath + ": unexpected manifest structure: " + e.what());
  }
  rep.pass = rep.worst_loss_rel <= rep.loss_tol && rep.worst_tensor_rel <= rep.tensor_tol &&
             rep.logits_rel <= rep.logits_tol;
  if (!rep.pass) rep.failure = "tolerance exceeded";
  return rep;
}

}  // namespace fresco
