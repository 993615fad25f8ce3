// JSON job descriptions -> JobSpec -> DeepLearningTask, with strict key and type checks.
#include "fresco/core/job.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "fresco/core/log.h"
#include "fresco/core/models.h"
#include "json_depth.h"

namespace fresco {

using nlohmann::json;

namespace {
// The keys of a job file's top level, for the hint when one is given inside a section.
const std::set<std::string>& top_level_keys() {
  static const std::set<std::string> keys = {"name",       "model",     "data",
                                             "batch_size", "epochs",    "seed",
                                             "device",     "precision", "freeze_first_layer",
                                             "augment",    "loss",      "optimizer",
                                             "scheduler",  "ema",       "progressive_resolution",
                                             "ranks"};
  return keys;
}

struct Reader {
  const json& j;
  std::string where;
  std::set<std::string> used;
  bool nested = true;           // a section (data, optimizer, ...), not the file's top level
  std::set<std::string> known;  // every key asked for, present or not: what an unknown key is told

  void object() const {
    FRESCO_CHECK(j.is_object(), ErrorCode::kBadConfig,
                 where + ": expected an object, found " + j.type_name());
  }
  bool has(const std::string& k) {
    known.insert(k);
    return j.contains(k);
  }
  const json& at(const std::string& k) {
    known.insert(k);
    used.insert(k);
    return j.at(k);
  }
  template <class T>
  T get(const std::string& k, T def) {
    known.insert(k);
    if (!j.contains(k)) return def;
    const json& v = at(k);
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) throw std::runtime_error("");
      } else if constexpr (std::is_integral_v<T>) {
        if (!v.is_number_integer()) throw std::runtime_error("");
        // in T's range, not wrapped or truncated (epochs 4294967297 is not 1, seed -1 not 2^64 - 1)
        const bool in_range =
            v.is_number_unsigned()
                ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                      (std::is_unsigned_v<T> ||
                       v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max()));
        if (!in_range)
          throw Error(ErrorCode::kBadConfig, where + "." + k + ": " + v.dump() + " is outside [" +
                                                 std::to_string(std::numeric_limits<T>::min()) + ", " +
                                                 std::to_string(std::numeric_limits<T>::max()) + "]");
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) throw std::runtime_error("");
        if (!std::isfinite(v.get<T>()))
          throw Error(ErrorCode::kBadConfig, where + "." + k + ": " + v.dump() + " does not fit a float");
      } else {
        if (!v.is_string()) throw std::runtime_error("");
      }
      return v.get<T>();
    } catch (const Error&) {
      throw;
    } catch (const std::exception&) {
      throw Error(ErrorCode::kBadConfig, where + "." + k + ": wrong type, found " + v.dump());
    }
  }
  std::vector<float> floats(const std::string& k) {
    known.insert(k);
    FRESCO_CHECK(has(k), ErrorCode::kBadConfig, where + ": missing key \"" + k + "\"");
    const json& v = at(k);
    FRESCO_CHECK(v.is_array(), ErrorCode::kBadConfig, where + "." + k + ": expected an array of numbers");
    std::vector<float> out;
    for (const auto& x : v) {
      FRESCO_CHECK(x.is_number(), ErrorCode::kBadConfig,
                   where + "." + k + ": expected numbers, found " + x.dump());
      out.push_back(x.get<float>());
      FRESCO_CHECK(std::isfinite(out.back()), ErrorCode::kBadConfig,
                   where + "." + k + ": " + x.dump() + " does not fit a float");
    }
    return out;
  }
  // Every key of the object was read: an unknown one is an error that lists the keys this object takes
  // (and says so when the key belongs at the file's top level).
  void done() const {
    for (const auto& [k, v] : j.items()) {
      if (used.count(k)) continue;
      std::string takes;
      for (const auto& name : known) takes += (takes.empty() ? "" : ", ") + name;
      const bool top = nested && top_level_keys().count(k);
      throw Error(ErrorCode::kBadConfig,
                  where + ": unknown key \"" + k + "\"" +
                      (top ? " (\"" + k + "\" is a key of the job file's top level, not of this section)"
                           : " (this section takes: " + takes + ")"));
    }
  }
};
}  // namespace

JobSpec parse_job(const std::string& text, const std::string& source) {
  check_json_depth(text, source);
  json j;
  try {
    // A key given twice in one object is refused (JSON would silently keep the last).
    std::vector<std::set<std::string>> keys;
    j = json::parse(text, [&](int, json::parse_event_t event, json& value) {
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      if (event == json::parse_event_t::object_end) keys.pop_back();
      if (event == json::parse_event_t::key && !keys.back().insert(value.get<std::string>()).second)
        throw Error(ErrorCode::kBadConfig, source + ": key \"" + value.get<std::string>() + "\" given twice");
      return true;
    });
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::kBadConfig, source + ": not valid JSON: " + e.what());
  }
  JobSpec s;
  s.source = source;
  Reader r{j, source, {}};
  r.nested = false;
  r.object();
  s.name = r.get<std::string>("name", "job");
  FRESCO_CHECK(r.has("model"), ErrorCode::kBadConfig, source + ": missing key \"model\"");
  if (r.at("model").is_string()) {  // a built-in network by name (models.h)
    const std::string name = r.at("model").get<std::string>();
    FRESCO_CHECK(
        name == "resnet18" || name == "resnet34" || name == "resnet50" || name == "small_resnet",
        ErrorCode::kBadConfig,
        source + ": model \"" + name +
            "\" is not a built-in network (known: \"resnet18\", \"resnet34\", \"resnet50\" with the CIFAR "
            "stem, \"small_resnet\"); give a layer list");
    s.model = name == "resnet18"       ? models::resnet18(10)
              : name == "resnet34"     ? models::resnet34(10)
              : name == "small_resnet" ? models::small_resnet(10)
                                       : models::resnet50(10);
  } else {
    s.model = BluePrint::from_json(r.at("model").dump(), source);
    FRESCO_CHECK(!s.model.empty(), ErrorCode::kBadConfig,
                 source + ".model: the layer list is empty (give layers, or a built-in network by name)");
  }
  FRESCO_CHECK(r.has("data"), ErrorCode::kBadConfig, source + ": missing key \"data\"");
  {
    Reader d{r.at("data"), source + ".data", {}};
    d.object();
    s.data.kind = d.get<std::string>("dataset", "");
    FRESCO_CHECK(
        data::is_dataset_kind(s.data.kind), ErrorCode::kBadConfig,
        source +
            ".data.dataset: expected \"fashion-mnist\", \"mnist\", \"cifar10\" or \"cifar100\", found \"" +
            s.data.kind + "\"");
    // MNIST-style sets default to their folder under /usr/share/datasets (scripts/install-deps.sh installs
    // Fashion-MNIST there); a JPEG folder has no default.
    s.data.path = d.get<std::string>(
        "path", s.data.kind.rfind("cifar", 0) == 0 ? std::string() : "/usr/share/datasets/" + s.data.kind);
    FRESCO_CHECK(s.data.kind.rfind("cifar", 0) != 0 || !s.data.path.empty(), ErrorCode::kBadConfig,
                 source + ".data.path: required for dataset \"" + s.data.kind +
                     "\" (the binary version's folder or .tar.gz" +
                     (s.data.kind == "cifar10" ? ", or a JPEG image folder or its .tar.gz)" : ")"));
    if (d.has("normalize")) {
      Reader n{d.at("normalize"), source + ".data.normalize", {}};
      n.object();
      s.normalize.mean = n.floats("mean");
      s.normalize.std = n.floats("std");
      n.done();
      s.normalize_set = true;
    }
    d.done();
  }
  s.batch_size = r.get<int64_t>("batch_size", 128);
  s.epochs = r.get<int32_t>("epochs", 1);
  s.seed = r.get<uint64_t>("seed", 0);
  s.device = r.get<std::string>("device", "auto");
  s.precision = parse_precision(r.get<std::string>("precision", "fp32"), source + ".precision");
  s.freeze_first_layer = r.get<bool>("freeze_first_layer", false);
  s.ranks = r.get<int32_t>("ranks", 1);
  FRESCO_CHECK(s.ranks >= 1, ErrorCode::kBadConfig,
               source + ".ranks: must be 1 or more, found " + std::to_string(s.ranks));
  if (r.has("augment")) {  // training-time augmentation: {"crop_pad": 4, "flip": true}
    Reader a{r.at("augment"), source + ".augment", {}};
    a.object();
    s.augment.crop_pad = a.get<int32_t>("crop_pad", 0);
    s.augment.flip = a.get<bool>("flip", false);
    s.augment.cutout = a.get<int32_t>("cutout", 0);
    FRESCO_CHECK(s.augment.cutout >= 0, ErrorCode::kBadConfig,
                 source + ".augment.cutout: must be >= 0, found " + std::to_string(s.augment.cutout));
    FRESCO_CHECK(s.augment.crop_pad >= 0, ErrorCode::kBadConfig,
                 source + ".augment.crop_pad: must be >= 0, found " + std::to_string(s.augment.crop_pad));
    a.done();
  }
  if (r.has("progressive_resolution")) {  // {"begin": 24, "end": 32, "begin_epochs": 10}; [h, w] or one side
    Reader p{r.at("progressive_resolution"), source + ".progressive_resolution", {}};
    p.object();
    auto size = [&](const char* k, int64_t& h, int64_t& w) {
      if (!p.has(k)) return;  // the data's
      const json& v = p.at(k);
      const std::string where = p.where + "." + k;
      auto side = [&](const json& x) {
        FRESCO_CHECK(x.is_number_integer() && x.get<int64_t>() >= 1 && x.get<int64_t>() <= (int64_t{1} << 20),
                     ErrorCode::kBadConfig,
                     where + ": expected a side in pixels (1 or more) or [height, width], found " + v.dump());
        return x.get<int64_t>();
      };
      if (v.is_array()) {
        FRESCO_CHECK(v.size() == 2, ErrorCode::kBadConfig,
                     where + ": expected [height, width], found " + v.dump());
        h = side(v[0]);
        w = side(v[1]);
      } else {
        h = w = side(v);
      }
    };
    size("begin", s.progressive.begin_h, s.progressive.begin_w);
    size("end", s.progressive.end_h, s.progressive.end_w);
    FRESCO_CHECK(p.has("begin_epochs"), ErrorCode::kBadConfig, p.where + ": missing key \"begin_epochs\"");
    s.progressive.begin_epochs = p.get<int32_t>("begin_epochs", 0);
    FRESCO_CHECK(
        s.progressive.begin_epochs >= 1, ErrorCode::kBadConfig,
        p.where + ".begin_epochs: must be 1 or more, found " + std::to_string(s.progressive.begin_epochs));
    p.done();
  }
  if (r.has("ema")) {  // an exponential moving average of the weights: {"decay": 0.999, "every": 1}
    Reader e{r.at("ema"), source + ".ema", {}};
    e.object();
    FRESCO_CHECK(e.has("decay"), ErrorCode::kBadConfig, source + ".ema: missing key \"decay\"");
    s.ema_decay = e.get<double>("decay", 0.0);
    s.ema_every = e.get<int32_t>("every", 1);
    FRESCO_CHECK(s.ema_decay > 0.0f && s.ema_decay < 1.0f, ErrorCode::kBadConfig,
                 source + ".ema.decay: must be in (0, 1), found " + std::to_string(s.ema_decay));
    FRESCO_CHECK(s.ema_every >= 1, ErrorCode::kBadConfig,
                 source + ".ema.every: must be 1 or more steps, found " + std::to_string(s.ema_every));
    e.done();
  }
  if (r.has("loss")) {
    Reader l{r.at("loss"), source + ".loss", {}};
    l.object();
    const std::string type = l.get<std::string>("type", "cross_entropy");
    FRESCO_CHECK(type == "cross_entropy", ErrorCode::kBadConfig,
                 source + ".loss.type: expected \"cross_entropy\", found \"" + type + "\"");
    s.loss.smoothing = l.get<float>("label_smoothing", 0.0f);
    l.done();
  }
  if (r.has("optimizer")) {
    Reader o{r.at("optimizer"), source + ".optimizer", {}};
    o.object();
    const std::string type = o.get<std::string>("type", "adamw");
    if (type == "sgd")
      s.optimizer = SGD();
    else if (type == "adam")
      s.optimizer = Adam();
    else if (type == "adamw")
      s.optimizer = AdamW();
    else if (type == "lars")
      s.optimizer = LARS();
    else
      throw Error(ErrorCode::kBadConfig,
                  source + ".optimizer.type: expected sgd, adam, adamw or lars, found \"" + type + "\"");
    Optimizer& op = s.optimizer;
    op.lr = o.get<float>("lr", op.lr);
    op.weight_decay = o.get<float>("weight_decay", op.weight_decay);
    // the other keys belong to some kinds: sgd's momentum would be ignored by adam, adam's betas by sgd
    const bool sgd = type == "sgd", lars = type == "lars";
    static const std::map<std::string, std::vector<std::string>> kTakenBy = {
        {"beta1", {"adam", "adamw"}},
        {"beta2", {"adam", "adamw"}},
        {"eps", {"adam", "adamw"}},
        {"momentum", {"sgd", "lars"}},
        {"nesterov", {"sgd"}},
        {"eta", {"lars"}},
        {"no_decay_1d", {"sgd", "adam", "adamw"}}};
    for (const auto& [key, kinds] : kTakenBy) {
      if (!o.has(key) || std::find(kinds.begin(), kinds.end(), type) != kinds.end()) continue;
      if (key == "no_decay_1d" && lars && o.at(key) == true) continue;  // lars always excludes them
      std::string owners;
      for (const std::string& k : kinds) owners += (owners.empty() ? "" : ", ") + k;
      throw Error(ErrorCode::kBadConfig,
                  source + ".optimizer." + key + ": not a setting of " + type + " (it is " + owners + "'s" +
                      (key == "no_decay_1d" ? "; lars always excludes the 1-d parameters: true only)" : ")"));
    }
    op.no_decay_1d = o.get<bool>("no_decay_1d", op.no_decay_1d);
    if (sgd || lars) {
      op.momentum = o.get<float>("momentum", op.momentum);
      if (sgd) op.nesterov = o.get<bool>("nesterov", op.nesterov);
      if (lars) op.eta = o.get<float>("eta", op.eta);
    } else {
      op.beta1 = o.get<float>("beta1", op.beta1);
      op.beta2 = o.get<float>("beta2", op.beta2);
      op.eps = o.get<float>("eps", op.eps);
    }
    o.done();
    try {  // the settings checked here, named with the file
      op.validate();
    } catch (const Error& e) {
      throw Error(e.code(), source + "." + e.what());
    }
  }
  if (r.has("scheduler")) {
    Reader c{r.at("scheduler"), source + ".scheduler", {}};
    c.object();
    const std::string type = c.get<std::string>("type", "constant");
    // each kind's own settings; another kind's is named as such, not ignored
    static const std::map<std::string, std::set<std::string>> kTakes = {
        {"constant", {}},
        {"cosine", {"min_lr"}},
        {"step", {"step_size", "gamma"}},
        {"multistep", {"milestones", "gamma"}},
        {"exponential", {"gamma"}},
        {"polynomial", {"power", "total_epochs"}},
        {"cosine_restarts", {"t0", "t_mult", "min_lr"}},
        {"one_cycle",
         {"pct_start", "anneal", "div_factor", "final_div_factor", "three_phase", "cycle_momentum",
          "base_momentum", "max_momentum"}}};
    if (const auto kind = kTakes.find(type); kind != kTakes.end())
      for (const char* key : {"min_lr", "step_size", "gamma", "milestones", "power", "total_epochs", "t0",
                              "t_mult", "pct_start", "anneal", "div_factor", "final_div_factor",
                              "three_phase", "cycle_momentum", "base_momentum", "max_momentum"})
        if (c.has(key) && !kind->second.count(key)) {
          std::string takes;
          for (const auto& k : kind->second) takes += (takes.empty() ? "" : ", ") + k;
          throw Error(ErrorCode::kBadConfig, source + ".scheduler." + key + ": not a setting of " + type +
                                                 " (it takes " + (takes.empty() ? "none" : takes) +
                                                 ", and warmup_epochs)");
        }
    Scheduler& sc = s.scheduler;
    if (type == "constant") {
      sc = ConstantLR();
    } else if (type == "cosine") {
      sc = CosineAnnealingLR();
      sc.min_lr = c.get<float>("min_lr", 0.0f);
    } else if (type == "step") {  // the keys of each kind only: another kind's is an unknown key
      FRESCO_CHECK(c.has("step_size"), ErrorCode::kBadConfig,
                   source + ".scheduler: type \"step\" needs \"step_size\" (epochs between decays)");
      sc = StepLR(c.get<int32_t>("step_size", 1), c.get<float>("gamma", 0.1f));
    } else if (type == "multistep") {
      FRESCO_CHECK(c.has("milestones") && c.at("milestones").is_array(), ErrorCode::kBadConfig,
                   source + ".scheduler: type \"multistep\" needs \"milestones\" (an array of epochs)");
      std::vector<int32_t> ms;
      for (const auto& v : c.at("milestones")) {
        FRESCO_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= INT32_MAX,
                     ErrorCode::kBadConfig,
                     source + ".scheduler.milestones: expected whole epochs of 1 or more, found " + v.dump());
        ms.push_back(static_cast<int32_t>(v.get<int64_t>()));
      }
      sc = MultiStepLR(std::move(ms), c.get<float>("gamma", 0.1f));
    } else if (type == "exponential") {
      FRESCO_CHECK(c.has("gamma"), ErrorCode::kBadConfig,
                   source + ".scheduler: type \"exponential\" needs \"gamma\" (the decay per epoch)");
      sc = ExponentialLR(c.get<float>("gamma", 1.0f));
    } else if (type == "polynomial") {
      sc = PolynomialLR(c.get<float>("power", 1.0f), c.get<int32_t>("total_epochs", 0));
    } else if (type == "cosine_restarts") {
      FRESCO_CHECK(c.has("t0"), ErrorCode::kBadConfig,
                   source + ".scheduler: type \"cosine_restarts\" needs \"t0\" (the first cycle's epochs)");
      sc = CosineAnnealingWarmRestarts(c.get<int32_t>("t0", 1), c.get<int32_t>("t_mult", 1),
                                       c.get<float>("min_lr", 0.0f));
    } else if (type == "one_cycle") {  // PyTorch's OneCycleLR, max_lr = optimizer.lr
      sc = OneCycleLR(c.get<double>("pct_start", 0.3));
      const std::string anneal = c.get<std::string>("anneal", "cos");
      FRESCO_CHECK(anneal == "cos" || anneal == "linear", ErrorCode::kBadConfig,
                   source + ".scheduler.anneal: expected \"cos\" or \"linear\", found \"" + anneal + "\"");
      sc.anneal_linear = anneal == "linear";
      sc.div_factor = c.get<double>("div_factor", sc.div_factor);
      sc.final_div_factor = c.get<double>("final_div_factor", sc.final_div_factor);
      sc.three_phase = c.get<bool>("three_phase", false);
      sc.cycle_momentum = c.get<bool>("cycle_momentum", true);
      sc.base_momentum = c.get<double>("base_momentum", sc.base_momentum);
      sc.max_momentum = c.get<double>("max_momentum", sc.max_momentum);
    } else {
      throw Error(ErrorCode::kBadConfig,
                  source +
                      ".scheduler.type: expected constant, cosine, step, multistep, exponential, "
                      "polynomial, cosine_restarts or one_cycle, found \"" +
                      type + "\"");
    }
    sc.warmup_epochs = c.get<int32_t>("warmup_epochs", 0);
    c.done();
    try {
      sc.validate();
    } catch (const Error& e) {
      throw Error(e.code(), source + "." + e.what());
    }
  }
  r.done();
  FRESCO_CHECK(s.batch_size > 0, ErrorCode::kBadConfig,
               source + ".batch_size: must be positive, found " + std::to_string(s.batch_size));
  FRESCO_CHECK(s.epochs > 0, ErrorCode::kBadConfig,
               source + ".epochs: must be positive, found " + std::to_string(s.epochs));
  return s;
}

DType parse_precision(const std::string& name, const std::string& where) {
  FRESCO_CHECK(name == "fp32" || name == "bf16" || name == "fp16", ErrorCode::kBadConfig,
               where + ": expected \"fp32\", \"bf16\" or \"fp16\", found \"" + name + "\"");
  return name == "bf16" ? DType::BF16 : name == "fp16" ? DType::F16 : DType::F32;
}

JobSpec load_job(const std::string& path) {
  std::error_code ec;
  FRESCO_CHECK(!std::filesystem::is_directory(path, ec), ErrorCode::kMissingInput,
               path + ": is a directory, not a job file");
  std::ifstream f(path);
  FRESCO_CHECK(f.good(), ErrorCode::kMissingInput, path + ": cannot open job file");
  std::stringstream ss;
  ss << f.rdbuf();
  JobSpec job = parse_job(ss.str(), path);
  // A relative data path is the job file's: the same job runs from any working directory. (One that exists
  // only from the working directory, as job files were read before, is used with a warning.)
  const std::filesystem::path data(job.data.path);
  if (!job.data.path.empty() && data.is_relative()) {
    const std::string beside = (std::filesystem::path(path).parent_path() / data).lexically_normal().string();
    std::error_code e1, e2;
    if (!std::filesystem::exists(beside, e1) && std::filesystem::exists(data, e2)) {
      log().warn(
          "{}: data.path '{}' is taken from the working directory; relative paths are the job file's "
          "(as '{}'), write it so or give --data",
          path, job.data.path, beside);
    } else {
      job.data.path = beside;
    }
  }
  return job;
}

void configure(DeepLearningTask& task, const JobSpec& job) {
  task.model(job.model)
      .data(job.data)
      .batch_size(job.batch_size)
      .epochs(job.epochs)
      .seed(job.seed)
      .device(job.device)
      .precision(job.precision)
      .augment(job.augment)
      .loss(job.loss)
      .optimizer(job.optimizer)
      .scheduler(job.scheduler)
      .freeze_first_layer(job.freeze_first_layer)
      .ema(job.ema_decay, job.ema_every)
      .progressive_resolution(job.progressive)
      .ranks(job.ranks);
  if (job.normalize_set) task.normalize(job.normalize);
}

}  // namespace fresco
