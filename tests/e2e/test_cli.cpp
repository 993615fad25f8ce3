// The `fresco` CLI on bad input: each case exits non-zero with a sysexits status and exactly one stderr line
// that names the problem (file, field, expected vs found); nothing crashes or hangs. Also `fresco plugins`
// and `fresco golden` on good input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "e2e/fashion_mnist_fixture.h"

namespace fs = std::filesystem;

namespace {
struct Result {
  int status = -1;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fresco_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& args) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    const std::string cmd = "FRESCO_LOG=warn timeout 120 " + std::string(FRESCO_BIN_DIR) + "/fresco " + args +
                            " >" + out + " 2>" + err;
    const int rc = std::system(cmd.c_str());
    Result r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  // A one-epoch CPU job on Fashion-MNIST at data_path, written to `name`, with `extra` fields (",..." JSON).
  std::string job(const std::string& model, const std::string& data_path, const std::string& extra = "",
                  const std::string& name = "job.json") {
    return write(name, R"({"model":)" + model + R"(,"data":{"dataset":"fashion-mnist","path":")" + data_path +
                           R"("},"epochs":1,"device":"cpu")" + extra + "}");
  }
  // An IDX images file with the given header words and `data_bytes` bytes of pixels.
  std::string idx(const std::string& name, std::vector<uint32_t> header, size_t data_bytes) {
    std::string s;
    for (uint32_t w : header)
      for (int b = 3; b >= 0; --b) s.push_back(static_cast<char>((w >> (8 * b)) & 0xff));
    s.append(data_bytes, '\x7f');
    return write(name, s);
  }
  void expect_one_line(const Result& r, int status, const std::string& needle) {
    EXPECT_EQ(r.status, status) << r.err;
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
  fs::path dir_;
};

const std::string kMlp = R"([{"layer":"fc","out":16},{"layer":"relu"},{"layer":"fc","out":10}])";
}  // namespace

TEST_F(Cli, UnknownLayer) {
  expect_one_line(run("train " + job(R"([{"layer":"fc","out":16},{"layer":"convolution"}])", "/x")), 78,
                  "model layer 1: unknown layer \"convolution\"");
}

TEST_F(Cli, ZeroAndNegativeWidth) {
  expect_one_line(run("train " + job(R"([{"layer":"fc","out":0},{"layer":"fc","out":10}])", "/x")), 78,
                  "model layer 0 (fc): field \"out\" must be positive, found 0");
  expect_one_line(run("train " + job(R"([{"layer":"fc","out":-5},{"layer":"fc","out":10}])", "/x")), 78,
                  "found -5");
}

TEST_F(Cli, MissingDatasetPath) {
  expect_one_line(run("train " + job(kMlp, "/nonexistent/fashion")), 66,
                  "/nonexistent/fashion: no such file or directory (the data.path of");
  expect_one_line(run("train " + job(kMlp, "/nonexistent/fashion") + " --data /nowhere"), 66,
                  "/nowhere: no such file or directory (given by --data)");
  // a relative data path is the job file's: "data" beside the job, whatever the working directory
  const std::string relative = job(kMlp, "data");
  expect_one_line(run("plan " + relative), 66, (dir_ / "data").string() + ": no such file or directory");
}

// train --samples N trains on the first N training samples (a short run), and says so.
TEST_F(Cli, TrainOnTheFirstSamples) {
  FRESCO_REQUIRE_FASHION_MNIST();
  const Result r = run("train " + job(kMlp, fresco::e2e::kFashionDir) + " --samples 300");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("300 training / 10000 test samples"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final test accuracy"), std::string::npos) << r.out;
  EXPECT_EQ(run("train " + job(kMlp, fresco::e2e::kFashionDir) + " --samples 0").status, 64);
}

// --save writes a checkpoint after every epoch, --stop-after stops early, --resume continues to the same
// final accuracy as a run without a stop (the bits themselves: tests/e2e/test_checkpoint_cpu.cpp); another
// job's checkpoint and a missing one are refused.
TEST_F(Cli, SaveStopAndResume) {
  FRESCO_REQUIRE_FASHION_MNIST();
  const std::string j = write("job2.json", R"({"model":)" + kMlp + R"(,"data":{"dataset":"fashion-mnist"},)" +
                                               R"("epochs":2,"device":"cpu"})");
  const std::string ckpt = (dir_ / "run.ckpt").string();
  const Result whole = run("train " + j + " --samples 400");
  ASSERT_EQ(whole.status, 0) << whole.err;
  const Result first = run("train " + j + " --samples 400 --save " + ckpt + " --stop-after 1");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("stopped after epoch 1 of 2"), std::string::npos) << first.out;
  const Result rest = run("train " + j + " --samples 400 --resume " + ckpt + " --save " + ckpt);
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from " + ckpt + " after epoch 1 of 2"), std::string::npos) << rest.out;
  const auto final_line = [](const std::string& out) { return out.substr(out.find("final test accuracy")); };
  EXPECT_EQ(final_line(rest.out).substr(0, 30), final_line(whole.out).substr(0, 30)) << rest.out << whole.out;
  // eval: the checkpoint's weights on the test set give the run's final top-1
  const Result ev = run("eval " + j + " --checkpoint " + ckpt);
  ASSERT_EQ(ev.status, 0) << ev.err;
  const std::string top1 = whole.out.substr(whole.out.find("final test accuracy: ") + 21, 6);
  EXPECT_NE(ev.out.find("test top-1 " + top1), std::string::npos) << ev.out << " vs " << top1;
  EXPECT_EQ(run("eval " + j).status, 64);  // no --checkpoint
  expect_one_line(run("train " + j + " --samples 300 --resume " + ckpt), 78,
                  "was written by another job: data.train_samples 400 there, 300 here");
  expect_one_line(run("train " + j + " --resume " + (dir_ / "none.ckpt").string()), 66,
                  "none.ckpt: no such checkpoint file (--resume)");
  expect_one_line(run("train " + j + " --save /nonexistent-dir/a.ckpt"), 66, "does not exist (--save)");
}

// Within an epoch: --stop-after-steps stops there (--save-every-steps also saves on the way), and --resume
// continues at that step to the uninterrupted run's final accuracy.
TEST_F(Cli, SaveWithinAnEpochAndResume) {
  FRESCO_REQUIRE_FASHION_MNIST();
  const std::string j = write("job3.json", R"({"model":)" + kMlp + R"(,"data":{"dataset":"fashion-mnist"},)" +
                                               R"("batch_size":64,"epochs":2,"device":"cpu"})");
  const std::string ckpt = (dir_ / "within.ckpt").string();
  const Result whole = run("train " + j + " --samples 400");  // 7 steps an epoch
  ASSERT_EQ(whole.status, 0) << whole.err;
  const Result first =
      run("train " + j + " --samples 400 --save " + ckpt + " --save-every-steps 3 --stop-after-steps 10");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("stopped at step 3 of 7 of epoch 2 of 2"), std::string::npos) << first.out;
  const Result rest = run("train " + j + " --samples 400 --resume " + ckpt);
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_NE(rest.out.find("resumed from " + ckpt + " at step 3 of 7 of epoch 2 of 2"), std::string::npos)
      << rest.out;
  const auto final_line = [](const std::string& out) { return out.substr(out.find("final test accuracy")); };
  EXPECT_EQ(final_line(rest.out).substr(0, 30), final_line(whole.out).substr(0, 30)) << rest.out << whole.out;
  expect_one_line(run("train " + j + " --samples 400 --save-every-steps 3"), 64,
                  "--save-every-steps writes the --save checkpoint; give --save PATH too");
}

// A whole number with a leading zero is decimal, as it was checked (CLI11 alone reads it as octal).
TEST_F(Cli, LeadingZerosAreDecimal) {
  FRESCO_REQUIRE_FASHION_MNIST();
  const Result r = run("train " + job(kMlp, fresco::e2e::kFashionDir) + " --samples 128 --epochs 010");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("10 epochs"), std::string::npos) << r.out;
}

// --seed overrides the job's seed: the same run as the job file's own seed, another run for another seed; a
// checkpoint resumes only with the seed that wrote it; a negative seed is refused.
TEST_F(Cli, SeedOption) {
  FRESCO_REQUIRE_FASHION_MNIST();
  const std::string seeded = job(kMlp, fresco::e2e::kFashionDir, R"(,"seed":7)", "seeded.json");
  const std::string plain = job(kMlp, fresco::e2e::kFashionDir);  // seed 0
  // the epoch line's losses and accuracy (not its timing)
  const auto losses = [](const Result& r) {
    const size_t at = r.out.find("train loss"), end = r.out.find("  lr ", at);
    return at == std::string::npos || end == std::string::npos ? std::string() : r.out.substr(at, end - at);
  };
  const Result file = run("train " + seeded + " --samples 256"),
               same = run("train " + plain + " --samples 256 --seed 7"),
               other = run("train " + plain + " --samples 256 --seed 8");
  ASSERT_EQ(file.status, 0) << file.err;
  ASSERT_EQ(same.status, 0) << same.err;
  ASSERT_EQ(other.status, 0) << other.err;
  ASSERT_FALSE(losses(file).empty()) << file.out;
  EXPECT_EQ(losses(same), losses(file));
  EXPECT_NE(losses(other), losses(file));
  const std::string ckpt = (dir_ / "seed7.ckpt").string();
  ASSERT_EQ(run("train " + plain + " --samples 256 --seed 7 --save " + ckpt + " --stop-after-steps 1").status,
            0);
  expect_one_line(run("train " + plain + " --samples 256 --seed 8 --resume " + ckpt), 78,
                  "was written by another job: seed 7 there, 8 here");
  const Result negative = run("train " + plain + " --seed -1");
  EXPECT_EQ(negative.status, 64);
  EXPECT_NE(negative.err.find("--seed: must be at least 0, found -1"), std::string::npos) << negative.err;
}

// --plugin loads a named plugin before the command runs; a missing or refused one is an error.
TEST_F(Cli, PluginOption) {
  expect_one_line(run("--plugin " + (dir_ / "absent.so").string() + " plugins"), 66,
                  "absent.so: no such plugin file");
  expect_one_line(
      run("--plugin " + std::string(FRESCO_TEST_PLUGIN_DIR) + "/libfresco-test-wrong_major.so plan x"), 78,
      "wrong ABI major");
}

// Options of the whole program may follow the subcommand; plugin paths named on the command line are taken
// from the working directory.
TEST_F(Cli, LogLevelAfterTheSubcommandAndRelativePluginPaths) {
  EXPECT_EQ(run("plugins --log-level warn").status, 0);
  const std::string cmd = "cd " + std::string(FRESCO_LIB_DIR) + " && FRESCO_LOG=warn " +
                          std::string(FRESCO_BIN_DIR) + "/fresco plugins ./libfresco-cpu.so > " +
                          (dir_ / "out").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << slurp((dir_ / "out").string());
  EXPECT_EQ(slurp((dir_ / "out").string()).find("is relative"), std::string::npos)
      << slurp((dir_ / "out").string());
}

TEST_F(Cli, MissingJobFileAndBadJson) {
  expect_one_line(run("train " + (dir_ / "nope.json").string()), 66, "nope.json: cannot open job file");
  expect_one_line(run("train " + write("bad.json", "{\"model\": [")), 78, "bad.json: not valid JSON");
}

TEST_F(Cli, IdxWrongMagic) {
  idx("train-images-idx3-ubyte", {0x00000903u, 2, 2, 2}, 8);
  idx("train-labels-idx1-ubyte", {0x00000801u, 2}, 2);
  expect_one_line(run("train " + job(kMlp, dir_.string())), 65, "bad IDX magic 0x00000903");
}

TEST_F(Cli, IdxAbsurdDimensions) {
  idx("train-images-idx3-ubyte", {0x00000803u, 2, 100000, 100000}, 8);
  idx("train-labels-idx1-ubyte", {0x00000801u, 2}, 2);
  expect_one_line(run("train " + job(kMlp, dir_.string())), 65, "train-images-idx3-ubyte");
}

TEST_F(Cli, IdxTruncated) {
  idx("train-images-idx3-ubyte", {0x00000803u, 10, 28, 28}, 100);
  idx("train-labels-idx1-ubyte", {0x00000801u, 10}, 10);
  expect_one_line(run("train " + job(kMlp, dir_.string())), 65,
                  "truncated: header promises 7840 bytes of data, found 100");
}

TEST_F(Cli, UnloadablePlugin) {
  const Result r = run("plugins " + std::string(FRESCO_TEST_PLUGIN_DIR) + "/libfresco-test-wrong_major.so");
  expect_one_line(r, 78, "wrong ABI major: plugin has 99.0");
  const Result m = run("plugins " + std::string(FRESCO_TEST_PLUGIN_DIR) + "/libfresco-test-missing_dep.so");
  expect_one_line(m, 78, "libfresco-test-missing_dep.so");
  const Result garbage = run("plugins " + write("libfresco-garbage.so", "not an ELF file"));
  expect_one_line(garbage, 78, "cannot load");
  // the dynamic loader's own words, without Boost.DLL's wrapper and its stale errno text
  EXPECT_NE(garbage.err.find("libfresco-garbage.so: file too short"), std::string::npos) << garbage.err;
  EXPECT_EQ(garbage.err.find("Bad file descriptor"), std::string::npos) << garbage.err;
}

TEST_F(Cli, PluginsListsTheCpuBackend) {
  const Result r = run("plugins");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("libfresco-cpu.so"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ABI 1."), std::string::npos) << r.out;
}

TEST_F(Cli, UsageErrors) {
  EXPECT_EQ(run("").status, 64);
  EXPECT_EQ(run("frobnicate").status, 64);
  EXPECT_EQ(run("train").status, 64);
  EXPECT_EQ(run("parity job.json --nodes --resync").status, 64);  // one mode or the other
  EXPECT_EQ(run("parity job.json --samples -5").status, 64);
  EXPECT_EQ(run("parity job.json --tolerance -1").status, 64);
  expect_one_line(run("plugins " + (dir_ / "absent.so").string()), 66, "absent.so: no such plugin file");
  // a mistyped command is named, with the nearest one
  expect_one_line(run("trian job.json"), 64, "unknown command 'trian' (did you mean 'train'?)");
  expect_one_line(run("--log-level warn plugin"), 64, "unknown command 'plugin' (did you mean 'plugins'?)");
  // number options say what they expected (not a range that prints DBL_MAX)
  const Result epochs = run("train job.json --epochs abc");
  EXPECT_EQ(epochs.status, 64);
  EXPECT_NE(epochs.err.find("--epochs: expected a whole number (at least 1), found 'abc'"), std::string::npos)
      << epochs.err;
  const Result tol = run("parity job.json --tolerance -1");
  EXPECT_NE(tol.err.find("--tolerance: must be at least 0, found -1"), std::string::npos) << tol.err;
  EXPECT_LT(tol.err.size(), 200u) << tol.err;
  EXPECT_EQ(run("golden case --steps 0").status, 64);
  EXPECT_EQ(run("parity job.json --tolerance inf").status, 64);
  const Result stop = run("train job.json --stop-after 2147483648");
  EXPECT_NE(stop.err.find("--stop-after: must be at most 2147483647"), std::string::npos) << stop.err;
}

TEST_F(Cli, GoldenPassesAndFails) {
  const std::string golden = std::string(FRESCO_TEST_DATA_DIR) + "/golden/";
  const Result ok = run("golden --device cpu " + golden + "mlp_adamw " + golden + "mlp_sgd_nesterov_partial");
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("mlp_adamw"), std::string::npos);
  size_t passes = 0;
  for (size_t at = ok.out.find(" PASS "); at != std::string::npos; at = ok.out.find(" PASS ", at + 1))
    ++passes;
  EXPECT_EQ(passes, 2u) << ok.out;
  expect_one_line(run("golden " + (dir_ / "missing").string()), 66, "not a golden case directory");
  // the folder of cases instead of the cases: the error lists them
  const Result parent = run("golden " + std::string(FRESCO_TEST_DATA_DIR) + "/golden");
  expect_one_line(parent, 66, "is not a golden case (no manifest.json) but holds cases; pass them:");
  EXPECT_NE(parent.err.find("/golden/mlp_adamw"), std::string::npos) << parent.err;
}
