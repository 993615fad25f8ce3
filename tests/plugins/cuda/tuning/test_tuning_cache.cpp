// The CUDA plugin's tuning cache (plugins/cuda/tuning/tuning_cache.h): plain file handling, no GPU needed.
#include "tuning/tuning_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using fresco::cuda::TunedChoice;
using fresco::cuda::TuningCache;

namespace {
fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("fresco_tuning_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}
std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
// Sets (or unsets, value null) an environment variable for one scope.
struct Env {
  std::string name;
  std::string old;
  bool had;
  Env(const char* n, const char* value) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~Env() {
    if (had)
      ::setenv(name.c_str(), old.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};
}  // namespace

TEST(TuningCache, EntriesSurviveToTheNextRun) {
  const fs::path dir = fresh_dir("roundtrip");
  const std::string path = (dir / "sub" / "cache.tsv").string();  // directories are created
  {
    TuningCache c(path);
    EXPECT_FALSE(c.find("k1"));
    c.put("k1", {3, "algo 55 tile 18 split 2", {0.031f, 0.0325f}});
    c.put("k2", {0, "engine 7 (0 of 12)", {0.089f}});
    ASSERT_TRUE(c.find("k1"));
  }
  TuningCache again(path);
  ASSERT_EQ(again.size(), 2u);
  const std::optional<TunedChoice> k1 = again.find("k1");
  ASSERT_TRUE(k1);
  EXPECT_EQ(k1->index, 3);
  EXPECT_EQ(k1->name, "algo 55 tile 18 split 2");
  ASSERT_EQ(k1->ms.size(), 2u);
  EXPECT_FLOAT_EQ(k1->ms[0], 0.031f);
  EXPECT_FLOAT_EQ(k1->ms[1], 0.0325f);
  EXPECT_EQ(again.find("k2")->index, 0);
  EXPECT_EQ(read_all(path).rfind("# fresco CUDA tuning cache", 0), 0u);  // a header line first
  fs::remove_all(dir);
}

TEST(TuningCache, ALaterLineReplacesAnEarlierOne) {
  const fs::path dir = fresh_dir("replace");
  const std::string path = (dir / "cache.tsv").string();
  {
    TuningCache c(path);
    c.put("k", {1, "first", {}});
    c.put("k", {4, "second", {0.5f}});
    EXPECT_EQ(c.find("k")->index, 4);
  }
  TuningCache again(path);
  ASSERT_TRUE(again.find("k"));
  EXPECT_EQ(again.find("k")->index, 4);
  EXPECT_EQ(again.find("k")->name, "second");
  fs::remove_all(dir);
}

TEST(TuningCache, DamagedLinesAreSkippedNotFatal) {
  const fs::path dir = fresh_dir("damaged");
  fs::create_directories(dir);
  const std::string path = (dir / "cache.tsv").string();
  {
    std::ofstream out(path);
    out << "# fresco CUDA tuning cache v1: key, index, description, times\n"
        << "good\t2\tname\t0.1,0.2\n"
        << "no tabs here\n"
        << "bad index\tx2\tname\t0.1\n"
        << "negative\t-1\tname\t\n"
        << "bad time\t1\tname\t0.1,zz\n"
        << "too\tmany\tfields\there\tnow\n"
        << "\t1\tempty key\t\n"
        << "no times\t5\tname\t\n";
  }
  testing::internal::CaptureStderr();
  TuningCache c(path);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("does not parse"), std::string::npos) << err;
  EXPECT_EQ(c.size(), 2u);
  ASSERT_TRUE(c.find("good"));
  EXPECT_EQ(c.find("good")->index, 2);
  ASSERT_TRUE(c.find("no times"));
  EXPECT_TRUE(c.find("no times")->ms.empty());
  EXPECT_FALSE(c.find("bad index"));
  EXPECT_FALSE(c.find("negative"));
  EXPECT_FALSE(c.find("bad time"));
  fs::remove_all(dir);
}

TEST(TuningCache, NoPathMeansNoFile) {
  TuningCache c("");
  c.put("k", {1, "n", {1.0f}});
  EXPECT_EQ(c.find("k")->index, 1);  // kept for this run
  EXPECT_TRUE(c.path().empty());
}

TEST(TuningCache, AnUnwritableFileIsReportedOnceAndTheRunGoesOn) {
  const fs::path dir = fresh_dir("unwritable");
  fs::create_directories(dir);
  const std::string path = (dir / "is_a_directory").string();
  fs::create_directories(path);  // a directory where the file should be: opening it for append fails
  TuningCache c(path);
  testing::internal::CaptureStderr();
  c.put("a", {1, "n", {}});
  c.put("b", {2, "n", {}});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot be written"), std::string::npos) << err;
  EXPECT_EQ(err.find("cannot be written"), err.rfind("cannot be written"));  // once
  EXPECT_EQ(c.find("b")->index, 2);
  fs::remove_all(dir);
}

TEST(TuningCache, KeysAndNamesWithTabsOrNewlinesAreNotStored) {
  const fs::path dir = fresh_dir("tabs");
  const std::string path = (dir / "cache.tsv").string();
  TuningCache c(path);
  c.put("a\tb", {1, "n", {}});
  c.put("k", {1, "line\nbreak", {}});
  c.put("neg", {-1, "n", {}});
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}

TEST(TuningCache, DefaultPathFollowsTheEnvironment) {
  {
    const Env e("FRESCO_CUDA_TUNING_CACHE", "/tmp/x/cache.tsv");
    EXPECT_EQ(fresco::cuda::default_tuning_cache_path(), "/tmp/x/cache.tsv");
  }
  {
    const Env e("FRESCO_CUDA_TUNING_CACHE", "off");
    EXPECT_EQ(fresco::cuda::default_tuning_cache_path(), "");
  }
  {
    const Env e("FRESCO_CUDA_TUNING_CACHE", nullptr), x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(fresco::cuda::default_tuning_cache_path(), "/xdg/fresco/cuda-tuning.tsv");
  }
  {
    const Env e("FRESCO_CUDA_TUNING_CACHE", nullptr), x("XDG_CACHE_HOME", nullptr), h("HOME", "/home/u");
    EXPECT_EQ(fresco::cuda::default_tuning_cache_path(), "/home/u/.cache/fresco/cuda-tuning.tsv");
  }
}

TEST(TuningCache, TimesReadBackExactly) {
  const fs::path dir = fresh_dir("exact");
  const std::string path = (dir / "cache.tsv").string();
  const std::vector<float> ms = {0.123456789f, 12345678.0f, 1.0e-7f, 33.679993f};
  TuningCache(path).put("k", {0, "n", ms});
  const std::optional<TunedChoice> got = TuningCache(path).find("k");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->ms, ms);  // bit for bit: decisions compare these times
  fs::remove_all(dir);
}

TEST(TuningCache, ATornLastLineDoesNotSwallowTheNextEntry) {
  const fs::path dir = fresh_dir("torn");
  const std::string path = (dir / "cache.tsv").string();
  TuningCache(path).put("k1", {1, "n", {0.5f}});
  {
    std::ofstream out(path, std::ios::app);
    out << "k2\t2\tna";  // a writer that died mid-line
  }
  TuningCache c(path);
  EXPECT_FALSE(c.find("k2"));
  c.put("k3", {3, "n", {0.25f}});
  TuningCache again(path);
  EXPECT_TRUE(again.find("k1"));
  ASSERT_TRUE(again.find("k3"));
  EXPECT_EQ(again.find("k3")->index, 3);
  fs::remove_all(dir);
}

TEST(TuningCache, AFileThatIsNotATuningCacheIsLeftAlone) {
  const fs::path dir = fresh_dir("foreign");
  fs::create_directories(dir);
  const std::string path = (dir / "notes.txt").string();
  {
    std::ofstream out(path);
    out << "my notes\nk\t1\tn\t0.5\n";
  }
  testing::internal::CaptureStderr();
  TuningCache c(path);
  c.put("k2", {2, "n", {}});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is not a fresco tuning cache"), std::string::npos) << err;
  EXPECT_FALSE(c.find("k"));                              // not read
  EXPECT_EQ(c.find("k2")->index, 2);                      // kept for this run
  EXPECT_EQ(read_all(path), "my notes\nk\t1\tn\t0.5\n");  // not written
  fs::remove_all(dir);
}
