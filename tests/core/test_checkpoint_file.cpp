// The checkpoint file (core/src/checkpoint/checkpoint_file.h): a written file reads back as written, the
// temporary file is gone after the rename, and a damaged one is refused with an error that says how: not a
// checkpoint, a newer format, truncated at any byte, a flipped byte in the header or in a record, trailing
// bytes, a missing file; a header of another shape is bad data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint_file.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/deep_learning_task.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"
#include "support/error_of.h"

using namespace fresco;
using fresco::test::error_of;
namespace fs = std::filesystem;

namespace {
class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("fresco_ckpt_" + std::to_string(::getpid()) + ".bin")).string();
    c_.header = R"({"format":"fresco checkpoint","epochs_done":2})";
    c_.records.push_back({"fc0.weight", {1, 2, 3, 4, 5, 6, 7, 8}});
    c_.records.push_back({"step_scalars", std::vector<uint8_t>(40, 9)});
    c_.records.push_back({"empty", {}});
  }
  void TearDown() override { fs::remove(path_); }
  std::string bytes() const {
    std::ifstream f(path_, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  void put(const std::string& b) const { std::ofstream(path_, std::ios::binary | std::ios::trunc) << b; }
  std::string path_;
  checkpoint::Contents c_;
};
}  // namespace

TEST_F(CheckpointFile, ReadsBackWhatWasWritten) {
  checkpoint::write_file(path_, c_);
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  const checkpoint::Contents r = checkpoint::read_file(path_);
  EXPECT_EQ(r.header, c_.header);
  ASSERT_EQ(r.records.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.records[i].name, c_.records[i].name);
    EXPECT_EQ(r.records[i].bytes, c_.records[i].bytes);
  }
  checkpoint::write_file(path_, c_);  // over an existing file
  EXPECT_EQ(checkpoint::read_file(path_).records.size(), 3u);
}

TEST_F(CheckpointFile, RefusesDamagedFiles) {
  checkpoint::write_file(path_, c_);
  const std::string good = bytes();
  for (size_t n = 0; n < good.size(); ++n) {  // cut anywhere
    put(good.substr(0, n));
    const auto [code, what] = error_of([&] { checkpoint::read_file(path_); });
    EXPECT_EQ(code, ErrorCode::kBadData) << n << ": " << what;
  }
  for (size_t at : {size_t{30}, good.size() - 3}) {  // a flipped byte in the header, in the last record
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    put(bad);
    const auto [code, what] = error_of([&] { checkpoint::read_file(path_); });
    EXPECT_EQ(code, ErrorCode::kBadData);
    EXPECT_NE(what.find("checksum does not match"), std::string::npos) << what;
  }
  put(good + "x");
  EXPECT_NE(error_of([&] { checkpoint::read_file(path_); }).second.find("bytes after the last record"),
            std::string::npos);
  std::string newer = good;
  newer[8] = 2;  // the format version
  put(newer);
  EXPECT_NE(error_of([&] { checkpoint::read_file(path_); }).second.find("this fresco reads format 1"),
            std::string::npos);
  put("PK\x03\x04 a zip file");
  EXPECT_NE(error_of([&] { checkpoint::read_file(path_); }).second.find("not a fresco checkpoint"),
            std::string::npos);
  fs::remove(path_);
  EXPECT_EQ(error_of([&] { checkpoint::read_file(path_); }).first, ErrorCode::kMissingInput);
  // an unwritable place is an I/O error naming it
  const auto [code, what] = error_of([&] { checkpoint::write_file("/nonexistent-dir/x.ckpt", c_); });
  EXPECT_EQ(code, ErrorCode::kIo);
  EXPECT_NE(what.find("/nonexistent-dir/x.ckpt"), std::string::npos) << what;
}

// A file that is sound but whose header is not a checkpoint's (JSON of another shape) is bad data, not an
// internal error, and writes nothing.
TEST_F(CheckpointFile, AForeignHeaderIsBadData) {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
  DeepLearningTask t;
  t.model(seq({flatten(), fc(4)})).data(data::synthetic_patches(32, 1), {}).batch_size(8).device("cpu");
  t.compile();
  const auto before = t.snapshot();
  for (const char* header : {R"({"format":5})", "[1,2]", "not json", R"({"format":"fresco checkpoint"})"}) {
    c_.header = header;
    checkpoint::write_file(path_, c_);
    const auto [code, what] = error_of([&] { t.load_checkpoint(path_); });
    EXPECT_EQ(code, ErrorCode::kBadData) << header << ": " << what;
  }
  EXPECT_EQ(t.snapshot(), before);
}
