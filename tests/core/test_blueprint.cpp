// BluePrint JSON form and job files: every malformed model or job is one kBadConfig error naming the
// layer/key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/temp_dir.h"
#include "fresco/core/blueprint.h"
#include "fresco/core/error.h"
#include "fresco/core/job.h"
#include "support/error_of.h"

using namespace fresco;

namespace {
std::string error_of(const std::function<void()>& f) {
  const auto [code, what] = test::error_of(f);
  EXPECT_EQ(code, ErrorCode::kBadConfig) << what;
  return what;
}
const char* kJob = R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"fashion-mnist","path":"/x"}})";
}  // namespace

TEST(BluePrint, ParsesTheGoldenFormat) {
  const BluePrint bp = BluePrint::from_json(
      R"([{"layer":"fc","out":128},{"layer":"relu"},{"layer":"dropout","p":0.25},{"layer":"fc","out":10,"bias":false}])",
      "m.json");
  ASSERT_EQ(bp.layers().size(), 4u);
  EXPECT_EQ(bp.layers()[0].out, 128);
  EXPECT_FLOAT_EQ(bp.layers()[2].p, 0.25f);
  EXPECT_FALSE(bp.layers()[3].bias);
  EXPECT_EQ(bp.layers()[3].path, "3");
  EXPECT_EQ(bp.describe(), "seq(fc(128), relu, dropout(0.250000), fc(10, bias=false))");
}

TEST(BluePrint, RejectsBadLayers) {
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"fc","out":8},{"layer":"convolution"}])", "m");
            }).find("model layer 1: unknown layer \"convolution\""),
            std::string::npos);
  EXPECT_NE(
      error_of([] { BluePrint::from_json(R"([{"layer":"fc","out":0}])", "m"); }).find("positive, found 0"),
      std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"([{"layer":"fc","out":-4}])", "m"); }).find("found -4"),
            std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"([{"layer":"fc"}])", "m"); }).find("missing field \"out\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"fc","out":8,"width":3}])", "m");
            }).find("unknown field \"width\" (it takes out, bias)"),
            std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"([{"layer":"fc","out":"8"}])", "m"); }).find("integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"([{"layer":"dropout","p":1.5}])", "m"); }).find("[0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"({"layer":"fc"})", "m"); }).find("array"),
            std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json("[{", "m"); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(
      error_of([] { BluePrint::from_json(R"([{"layer":"fc","out":99999999999}])", "m"); }).find("absurd"),
      std::string::npos);
}

// Nesting is bounded (blocks 64 deep, JSON 256 levels) so a hostile file cannot exhaust the stack, and a
// stride of 0 is refused rather than read as the default.
TEST(BluePrint, RejectsDeepNesting) {
  auto nested = [](int blocks) {
    std::string s = R"([{"layer":"fc","out":10}])";
    for (int i = 0; i < blocks; ++i) s = R"([{"layer":"residual","main":)" + s + "}]";
    return s;
  };
  EXPECT_EQ(BluePrint::from_json(nested(64), "m").layers().size(), 1u);
  EXPECT_NE(error_of([&] { BluePrint::from_json(nested(65), "m"); }).find("blocks nested more than 64 deep"),
            std::string::npos);
  const std::string brackets(100000, '[');
  EXPECT_NE(error_of([&] { BluePrint::from_json(brackets, "m"); }).find("JSON nested more than 256 levels"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              parse_job(R"({"model":)" + brackets, "j.json");
            }).find("j.json: JSON nested more than 256 levels"),
            std::string::npos);
  // brackets inside strings do not nest
  EXPECT_EQ(BluePrint::from_json(R"([{"layer":"custom","op":")" + std::string(300, '[') + R"("}])", "m")
                .layers()
                .size(),
            1u);
  // stride 0 is the default, as in the C++ API (1 for conv, the window for pools)
  EXPECT_EQ(BluePrint::from_json(R"([{"layer":"maxpool","k":2,"stride":0}])", "m").layers()[0].stride, 0);
}

TEST(Job, ParsesAndRejectsUnknownKeys) {
  const JobSpec j = parse_job(kJob, "j.json");
  EXPECT_EQ(j.data.kind, "fashion-mnist");
  EXPECT_EQ(j.batch_size, 128);
  EXPECT_NE(error_of([] {
              parse_job(
                  R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"fashion-mnist"},"bach_size":3})",
                  "j.json");
            }).find("unknown key \"bach_size\""),
            std::string::npos);
  // an unknown key lists what its section takes, or says it belongs at the top level
  const std::string typo = error_of([] {
    parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist","pth":"x"}})", "j.json");
  });
  EXPECT_NE(typo.find("j.json.data: unknown key \"pth\" (this section takes: dataset, normalize, path)"),
            std::string::npos)
      << typo;
  const std::string misplaced = error_of([] {
    parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist","augment":{"flip":true}}})",
              "j.json");
  });
  EXPECT_NE(misplaced.find("\"augment\" is a key of the job file's top level"), std::string::npos)
      << misplaced;
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":[],"data":{"dataset":"mnist"}})", "j.json");
            }).find("j.json.model: the layer list is empty"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job(R"({"data":{"dataset":"fashion-mnist"}})", "j.json");
            }).find("missing key \"model\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"imagenet"}})", "j.json");
            }).find("imagenet"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"batch_size":0})",
                        "j.json");
            }).find("batch_size"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        parse_job(
            R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"optimizer":{"type":"lamb"}})",
            "j.json");
      }).find("lamb"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"epochs":"ten"})",
                        "j.json");
            }).find("epochs"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"cifar10"}})", "j.json");
            }).find("data.path: required for dataset \"cifar10\""),
            std::string::npos);
}

// Values that used to be truncated, wrapped or ignored are refused, each naming its key.
TEST(Job, RefusesValuesItCannotHonour) {
  auto job_error = [](const std::string& extra) {
    return error_of([&] {
      parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"})" + extra + "}", "j.json");
    });
  };
  EXPECT_NE(
      job_error(R"(,"epochs":4294967297)").find("epochs: 4294967297 is outside [-2147483648, 2147483647]"),
      std::string::npos);
  EXPECT_NE(job_error(R"(,"seed":-1)").find("seed: -1 is outside [0, "), std::string::npos);
  EXPECT_NE(job_error(R"(,"augment":{"cutout":-3})").find("augment.cutout: must be >= 0"), std::string::npos);
  EXPECT_NE(job_error(R"(,"ema":{"decay":1.0})").find("ema.decay: must be in (0, 1)"), std::string::npos);
  EXPECT_NE(job_error(R"(,"ema":{"every":2})").find("ema: missing key \"decay\""), std::string::npos);
  const JobSpec ema = parse_job(
      R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"ema":{"decay":0.99,"every":4}})",
      "j.json");
  EXPECT_EQ(ema.ema_decay, 0.99);  // kept as the double it is, as PyTorch keeps it
  EXPECT_EQ(ema.ema_every, 4);
  EXPECT_EQ(
      parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"augment":{"cutout":8}})",
                "j.json")
          .augment.cutout,
      8);
  EXPECT_NE(job_error(R"(,"augment":{"crop_pad":2147483648})").find("crop_pad: 2147483648 is outside"),
            std::string::npos);
  EXPECT_NE(job_error(R"(,"optimizer":{"lr":1e39})").find("lr: 1e+39 does not fit a float"),
            std::string::npos);
  EXPECT_NE(job_error(R"(,"optimizer":{"type":"adam","momentum":0.9})")
                .find("optimizer.momentum: not a setting of adam"),
            std::string::npos);
  EXPECT_NE(
      job_error(R"(,"optimizer":{"type":"sgd","beta1":0.5})").find("optimizer.beta1: not a setting of sgd"),
      std::string::npos);
  // lars: momentum and eta its own, the 1-D exclusion fixed
  const JobSpec lars =
      parse_job(std::string(kJob).insert(
                    std::string(kJob).size() - 1,
                    R"(,"optimizer":{"type":"lars","lr":0.2,"momentum":0.8,"eta":0.01,"weight_decay":1e-4})"),
                "j.json");
  EXPECT_EQ(lars.optimizer.type, Optimizer::Type::LARS);
  EXPECT_EQ(lars.optimizer.momentum, 0.8f);
  EXPECT_EQ(lars.optimizer.eta, 0.01f);
  EXPECT_EQ(lars.optimizer.weight_decay, 1e-4f);
  EXPECT_TRUE(lars.optimizer.no_decay_1d);
  EXPECT_NE(job_error(R"(,"optimizer":{"type":"lars","nesterov":true})")
                .find("optimizer.nesterov: not a setting of lars"),
            std::string::npos);
  EXPECT_NE(job_error(R"(,"optimizer":{"type":"lars","no_decay_1d":false})")
                .find("optimizer.no_decay_1d: not a setting of lars"),
            std::string::npos);
  EXPECT_NE(
      job_error(R"(,"optimizer":{"type":"sgd","eta":0.01})").find("optimizer.eta: not a setting of sgd"),
      std::string::npos);
  EXPECT_NE(job_error(R"(,"optimizer":{"type":"lars","eta":0})").find("optimizer.eta must be in"),
            std::string::npos);
  EXPECT_NE(job_error(R"(,"scheduler":{"type":"constant","min_lr":0.1})")
                .find("scheduler.min_lr: not a setting of constant"),
            std::string::npos);
  EXPECT_NE(job_error(R"(,"epochs":1,"epochs":2)").find("key \"epochs\" given twice"), std::string::npos);
  EXPECT_NE(
      error_of([] {
        parse_job(
            R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist","normalize":{"mean":[0.1]}}})",
            "j.json");
      }).find("data.normalize: missing key \"std\""),
      std::string::npos);
  const JobSpec ok =
      parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"seed":7,)"
                R"("optimizer":{"type":"sgd","momentum":0.9,"nesterov":true},"freeze_first_layer":true})",
                "j.json");
  EXPECT_EQ(ok.seed, 7u);
  EXPECT_TRUE(ok.freeze_first_layer);
  EXPECT_EQ(ok.data.path, "/usr/share/datasets/mnist");
  EXPECT_FLOAT_EQ(ok.optimizer.momentum, 0.9f);
  try {
    load_job(FRESCO_TEST_DATA_DIR);
    ADD_FAILURE() << "a directory was read as a job file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMissingInput);
    EXPECT_NE(std::string(e.what()).find("is a directory, not a job file"), std::string::npos) << e.what();
  }
}

namespace {
// A job file j.json with scheduler `sched`, parsed; and the message of its refusal.
JobSpec parse(const std::string& sched) {
  return parse_job(
      R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},"scheduler":)" + sched + "}",
      "j.json");
}
std::string refusal(const std::string& sched) {
  return error_of([&] { parse(sched); });
}
}  // namespace

// "ranks" in a job file: data parallelism over that many ranks (DeepLearningTask::ranks).
TEST(Job, Ranks) {
  const std::string head = R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"})";
  EXPECT_EQ(parse_job(head + "}", "j.json").ranks, 1);
  EXPECT_EQ(parse_job(head + R"(,"ranks":4})", "j.json").ranks, 4);
  EXPECT_NE(error_of([&] { parse_job(head + R"(,"ranks":0})", "j.json"); }).find("ranks: must be 1 or more"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_job(head + R"(,"ranks":"two"})", "j.json"); }).find("ranks: wrong type"),
            std::string::npos);
}

// progressive_resolution in a job file: one side or [height, width], the keys it needs and refuses.
TEST(Job, ProgressiveResolution) {
  const std::string head = R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist"},)";
  const JobSpec j =
      parse_job(head + R"("progressive_resolution":{"begin":16,"end":[24,20],"begin_epochs":3}})", "j.json");
  EXPECT_EQ(j.progressive.begin_h, 16);
  EXPECT_EQ(j.progressive.begin_w, 16);
  EXPECT_EQ(j.progressive.end_h, 24);
  EXPECT_EQ(j.progressive.end_w, 20);
  EXPECT_EQ(j.progressive.begin_epochs, 3);
  const JobSpec only_begin =
      parse_job(head + R"("progressive_resolution":{"begin":[12,14],"begin_epochs":1}})", "j.json");
  EXPECT_EQ(only_begin.progressive.end_h, 0);  // the data's
  EXPECT_EQ(only_begin.progressive.begin_w, 14);
  auto err = [&](const std::string& p) {
    return error_of([&] { parse_job(head + R"("progressive_resolution":)" + p + "}", "j.json"); });
  };
  EXPECT_NE(err(R"({"begin":16})").find("progressive_resolution: missing key \"begin_epochs\""),
            std::string::npos);
  EXPECT_NE(err(R"({"begin":0,"begin_epochs":1})").find("progressive_resolution.begin: expected a side"),
            std::string::npos);
  EXPECT_NE(err(R"({"begin":[1,2,3],"begin_epochs":1})").find("expected [height, width]"), std::string::npos);
  EXPECT_NE(err(R"({"begin":8,"begin_epochs":0})").find("begin_epochs: must be 1 or more"),
            std::string::npos);
  EXPECT_NE(err(R"({"begin":8,"begin_epochs":1,"ramp":2})").find("unknown key \"ramp\""), std::string::npos);
}

// A relative data path in a job file is the file's; an absolute one and a parsed text's stay as written.
// The per-epoch schedulers in a job file: each kind with its own keys, another kind's key named as such,
// required keys asked for, and the settings checked with the file's name.
TEST(Job, PerEpochSchedulers) {
  const Scheduler step = parse(R"({"type":"step","step_size":2,"gamma":0.5,"warmup_epochs":1})").scheduler;
  EXPECT_EQ(step.type, Scheduler::Type::STEP);
  EXPECT_EQ(step.step_size, 2);
  EXPECT_EQ(step.gamma, 0.5f);
  EXPECT_EQ(step.warmup_epochs, 1);
  EXPECT_EQ(parse(R"({"type":"multistep","milestones":[3,6]})").scheduler.milestones,
            (std::vector<int32_t>{3, 6}));
  EXPECT_EQ(parse(R"({"type":"exponential","gamma":0.95})").scheduler.type, Scheduler::Type::EXPONENTIAL);
  const Scheduler poly = parse(R"({"type":"polynomial","power":2,"total_epochs":10})").scheduler;
  EXPECT_EQ(poly.power, 2.0f);
  EXPECT_EQ(poly.total_epochs, 10);
  const Scheduler restarts =
      parse(R"({"type":"cosine_restarts","t0":5,"t_mult":2,"min_lr":0.001})").scheduler;
  EXPECT_EQ(restarts.type, Scheduler::Type::COSINE_RESTARTS);
  EXPECT_EQ(restarts.t0, 5);
  EXPECT_EQ(restarts.t_mult, 2);
  EXPECT_EQ(restarts.min_lr, 0.001f);
  EXPECT_NE(refusal(R"({"type":"cosine_restarts"})").find("needs \"t0\""), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"cosine","gamma":0.5})").find("scheduler.gamma: not a setting of cosine"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type":"step"})").find("needs \"step_size\""), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"exponential"})").find("needs \"gamma\""), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"multistep","milestones":[0]})").find("scheduler.milestones"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"type":"multistep","milestones":5})").find("needs \"milestones\""),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"type":"step","step_size":1,"gamma":2})").find("j.json.scheduler.gamma must be in (0, 1]"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"type":"onecycle"})").find("expected constant, cosine, step, multistep"),
            std::string::npos);
}

// one_cycle in a job file: PyTorch's OneCycleLR settings by their names, defaults where not given, and the
// refusals (an unknown anneal, another kind's key, a warm-up of its own).
TEST(Job, OneCycleScheduler) {
  const Scheduler d = parse(R"({"type":"one_cycle"})").scheduler;
  EXPECT_EQ(d.type, Scheduler::Type::ONE_CYCLE);
  EXPECT_EQ(d.pct_start, 0.3);
  EXPECT_FALSE(d.anneal_linear);
  EXPECT_EQ(d.div_factor, 25.0);
  EXPECT_EQ(d.final_div_factor, 1e4);
  EXPECT_FALSE(d.three_phase);
  EXPECT_TRUE(d.cycle_momentum);
  EXPECT_EQ(d.base_momentum, 0.85);
  EXPECT_EQ(d.max_momentum, 0.95);
  const Scheduler c = parse(R"({"type":"one_cycle","pct_start":0.25,"anneal":"linear","div_factor":10,
      "final_div_factor":100,"three_phase":true,"cycle_momentum":false,"base_momentum":0.8,"max_momentum":0.9})")
                          .scheduler;
  EXPECT_EQ(c.pct_start, 0.25);
  EXPECT_TRUE(c.anneal_linear);
  EXPECT_EQ(c.div_factor, 10.0);
  EXPECT_EQ(c.final_div_factor, 100.0);
  EXPECT_TRUE(c.three_phase);
  EXPECT_FALSE(c.cycle_momentum);
  EXPECT_EQ(c.base_momentum, 0.8);
  EXPECT_EQ(c.max_momentum, 0.9);
  EXPECT_NE(refusal(R"({"type":"one_cycle","anneal":"exp"})").find("expected \"cos\" or \"linear\""),
            std::string::npos);
  EXPECT_NE(
      refusal(R"({"type":"one_cycle","min_lr":0.1})").find("scheduler.min_lr: not a setting of one_cycle"),
      std::string::npos);
  EXPECT_NE(
      refusal(R"({"type":"cosine","pct_start":0.1})").find("scheduler.pct_start: not a setting of cosine"),
      std::string::npos);
  EXPECT_NE(refusal(R"({"type":"one_cycle","warmup_epochs":1})").find("warms up itself"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"one_cycle","pct_start":2})").find("pct_start must be in"), std::string::npos);
}

TEST(Job, RelativeDataPathsAreTheJobFilesFolders) {
  fresco::test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "jobs");
  const std::string file = (dir.path() / "jobs" / "j.json").string();
  auto write_job = [&](const std::string& path) {
    std::ofstream(file) << R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist","path":")" + path +
                               R"("}})";
  };
  write_job("../data/mnist");
  EXPECT_EQ(load_job(file).data.path, (dir.path() / "data" / "mnist").string());
  write_job("/abs/mnist");
  EXPECT_EQ(load_job(file).data.path, "/abs/mnist");
  // a path that exists only from the working directory (how job files were read before) is kept, with a
  // warning
  std::filesystem::create_directories(dir.path() / "data" / "mnist");
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  write_job("data/mnist");
  const std::string kept = load_job(file).data.path;
  std::filesystem::current_path(cwd);
  EXPECT_EQ(kept, "data/mnist");
  EXPECT_EQ(
      parse_job(R"({"model":[{"layer":"fc","out":10}],"data":{"dataset":"mnist","path":"rel"}})", "j.json")
          .data.path,
      "rel");
}

TEST(Job, TheShippedJobParses) {
  const JobSpec j = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/mlp_fashion_mnist.json");
  EXPECT_EQ(j.model.layers().size(), 7u);
  EXPECT_EQ(j.epochs, 10);
  EXPECT_EQ(j.optimizer.type, Optimizer::Type::ADAMW);
  EXPECT_EQ(j.scheduler.type, Scheduler::Type::COSINE);
  EXPECT_EQ(j.scheduler.warmup_epochs, 1);
}

TEST(BluePrint, CustomOpLayers) {
  const BluePrint bp = BluePrint::from_json(
      R"([{"layer":"fc","out":16},{"layer":"custom","op":"swish"},{"layer":"fc","out":10}])", "m");
  ASSERT_EQ(bp.layers().size(), 3u);
  EXPECT_EQ(bp.layers()[1].kind, "custom");
  EXPECT_EQ(bp.layers()[1].op, "swish");
  EXPECT_EQ(bp.describe(), "seq(fc(16), custom(swish), fc(10))");
  EXPECT_EQ(seq({fc(8), custom("gelu_tanh"), fc(10)}).describe(), "seq(fc(8), custom(gelu_tanh), fc(10))");
  EXPECT_NE(
      error_of([] { BluePrint::from_json(R"([{"layer":"custom"}])", "m"); }).find("missing field \"op\""),
      std::string::npos);
  EXPECT_NE(error_of([] { BluePrint::from_json(R"([{"layer":"custom","op":""}])", "m"); }).find("non-empty"),
            std::string::npos);
}

// bn takes PyTorch's BatchNorm2d momentum and eps (defaults 0.1, 1e-5); their ranges are checked when the
// model compiles (tests/core/test_graph_atlas.cpp), their type when it is read.
TEST(BluePrint, BatchnormMomentumAndEps) {
  const BluePrint bp =
      BluePrint::from_json(R"([{"layer":"bn","momentum":0.3,"eps":0.001},{"layer":"bn"}])", "m");
  ASSERT_EQ(bp.layers().size(), 2u);
  EXPECT_FLOAT_EQ(bp.layers()[0].momentum, 0.3f);
  EXPECT_FLOAT_EQ(bp.layers()[0].eps, 0.001f);
  EXPECT_FLOAT_EQ(bp.layers()[1].momentum, 0.1f);
  EXPECT_FLOAT_EQ(bp.layers()[1].eps, 1e-5f);
  EXPECT_EQ(bp.describe(), "seq(bn(momentum=0.3, eps=0.001), bn)");
  EXPECT_EQ(seq({bn(0.3f, 1e-3f)}).describe(), "seq(bn(momentum=0.3, eps=0.001))");
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"bn","momentum":"fast"}])", "m");
            }).find("(bn): field \"momentum\" must be a number"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"fc","out":4,"eps":0.1}])", "m");
            }).find("unknown field \"eps\""),
            std::string::npos);
}

TEST(BluePrint, ResidualBlocks) {
  const BluePrint bp = BluePrint::from_json(
      R"([{"layer":"conv","out":8,"k":3,"pad":1},{"layer":"residual","main":[{"layer":"conv","out":8,"k":3,"pad":1},{"layer":"bn"}]},
          {"layer":"residual","main":[{"layer":"conv","out":16,"k":3,"stride":2,"pad":1}],"shortcut":[{"layer":"conv","out":16,"k":1,"stride":2},{"layer":"bn"}]}])",
      "m");
  ASSERT_EQ(bp.layers().size(), 3u);
  EXPECT_EQ(bp.layers()[1].main[1].path, "1.main.1");
  EXPECT_TRUE(bp.layers()[1].shortcut.empty());
  EXPECT_EQ(bp.layers()[2].shortcut[1].path, "2.shortcut.1");
  EXPECT_EQ(
      bp.describe(),
      "seq(conv(8, k=3, p=1), residual(seq(conv(8, k=3, p=1), bn)), residual(seq(conv(16, k=3, s=2, p=1)), "
      "seq(conv(16, k=1, s=2), bn)))");
  EXPECT_EQ(seq({conv(8, 3, 1, 2), maxpool(3, 2, 1), avgpool(2), conv(4, 1)}).describe(),
            "seq(conv(8, k=3, p=2), maxpool(3, s=2, p=1), avgpool(2), conv(4, k=1))");
  EXPECT_NE(
      error_of([] { BluePrint::from_json(R"([{"layer":"residual","main":[]}])", "m"); }).find("at least one"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"residual","main":[{"layer":"conv","out":8}]}])", "m");
            }).find("layer 0 main layer 0 (conv)"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { BluePrint::from_json(R"([{"layer":"relu","main":[]}])", "m"); }).find("unknown field"),
      std::string::npos);
}

TEST(Job, BuiltInModelsByName) {
  const JobSpec j = parse_job(R"({"model":"resnet18","data":{"dataset":"fashion-mnist"}})", "j.json");
  EXPECT_EQ(j.model.layers().size(), 21u);  // stem conv, bn, relu; 8 blocks each followed by relu; gap; fc
  EXPECT_EQ(j.model.layers()[5].main[0].path, "5.main.0");
  const JobSpec j50 = parse_job(R"({"model":"resnet50","data":{"dataset":"fashion-mnist"}})", "j.json");
  EXPECT_EQ(j50.model.layers().size(), 3u + 2u * 16u + 2u);  // CIFAR stem, 16 bottlenecks (+ relu), gap, fc
  EXPECT_NE(error_of([] {
              parse_job(R"({"model":"resnet101","data":{"dataset":"fashion-mnist"}})", "j.json");
            }).find("model \"resnet101\" is not a built-in network"),
            std::string::npos);
}

TEST(Job, TheResNet18JobsParse) {
  for (const char* f : {"resnet18_fashion_mnist.json", "resnet18_parity.json"}) {
    const JobSpec j = load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/" + f);
    EXPECT_EQ(j.model.layers().back().kind, "fc") << f;
    EXPECT_TRUE(j.optimizer.no_decay_1d) << f;
  }
}

// The example of several ranks with a progressive resolution (docs/job-files.md).
TEST(Job, TheRanksAndProgressiveResolutionJobParses) {
  const JobSpec j =
      load_job(std::string(FRESCO_TEST_DATA_DIR) + "/../../jobs/cnn_fashion_mnist_ranks_progressive.json");
  EXPECT_EQ(j.ranks, 2);
  EXPECT_EQ(j.progressive.begin_h, 20);
  EXPECT_EQ(j.progressive.begin_epochs, 2);
  EXPECT_EQ(j.batch_size % j.ranks, 0);
}

TEST(BluePrint, PointwiseActivations) {
  const BluePrint bp = BluePrint::from_json(
      R"([{"layer":"fc","out":8},{"layer":"silu"},{"layer":"sigmoid"},{"layer":"tanh"},{"layer":"fc","out":10}])",
      "m");
  EXPECT_EQ(bp.describe(), "seq(fc(8), silu, sigmoid, tanh, fc(10))");
  EXPECT_EQ(seq({fc(8), silu(), sigmoid(), tanh(), fc(10)}).describe(), bp.describe());
  EXPECT_NE(error_of([] {
              BluePrint::from_json(R"([{"layer":"tanh","k":3}])", "m");
            }).find("unknown field \"k\" (it takes none)"),
            std::string::npos);
}
