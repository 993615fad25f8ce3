// CIFAR-10 / CIFAR-100 binary versions (data/cifar_binary.cpp) on small files written here: records become
// HWC images with their labels in file order (CIFAR-10's five training batches in turn; CIFAR-100's fine
// labels), from the folder, its one subfolder or the .tar.gz; a set with a missing file, a file that is not
// whole records or a label out of range is refused; a folder without the files is not a binary set (cifar10
// then reads it as a JPEG folder, cifar100 refuses it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "support/error_of.h"

using namespace fresco;
using fresco::test::error_of;
namespace fs = std::filesystem;

namespace {
class CifarBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fresco_cifar_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // `n` records whose labels are first_label, first_label + 1, ...; pixel p of plane ch is (p + 7 ch +
  // label).
  static std::string records(int n, int first_label, int label_bytes) {
    std::string s;
    for (int i = 0; i < n; ++i) {
      const int label = first_label + i;
      if (label_bytes == 2) s.push_back(static_cast<char>(label % 20));  // coarse
      s.push_back(static_cast<char>(label));
      for (int ch = 0; ch < 3; ++ch)
        for (int p = 0; p < 1024; ++p) s.push_back(static_cast<char>((p + 7 * ch + label) & 0xff));
    }
    return s;
  }
  void put(const fs::path& p, const std::string& bytes) const {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
  }
  void cifar10(const fs::path& at) const {
    for (int b = 1; b <= 5; ++b) put(at / ("data_batch_" + std::to_string(b) + ".bin"), records(2, b, 1));
    put(at / "test_batch.bin", records(3, 0, 1));
  }
  fs::path dir_;
};

void expect_pixels(const data::Dataset& d, int64_t i) {
  const int label = d.labels[static_cast<size_t>(i)];
  for (int p : {0, 1, 513, 1023})
    for (int ch = 0; ch < 3; ++ch)
      ASSERT_EQ(d.images[static_cast<size_t>(i * 3072 + p * 3 + ch)],
                static_cast<uint8_t>((p + 7 * ch + label) & 0xff))
          << "image " << i << " pixel " << p << " channel " << ch;
}
}  // namespace

TEST_F(CifarBinary, Cifar10FromTheFolderItsSubfolderAndTheArchive) {
  cifar10(dir_ / "cifar-10-batches-bin");
  ASSERT_EQ(std::system(("tar czf " + (dir_ / "c10.tar.gz").string() + " -C " + dir_.string() +
                         " cifar-10-batches-bin")
                            .c_str()),
            0);
  for (const fs::path& p : {dir_ / "cifar-10-batches-bin", dir_, dir_ / "c10.tar.gz"}) {
    SCOPED_TRACE(p.string());
    const auto [train, test] = data::load_train_test("cifar10", p.string());
    ASSERT_EQ(train.n, 10);
    ASSERT_EQ(test.n, 3);
    EXPECT_EQ(train.h, 32);
    EXPECT_EQ(train.c, 3);
    EXPECT_EQ(train.num_classes, 10);
    EXPECT_EQ(train.labels, (std::vector<int32_t>{1, 2, 2, 3, 3, 4, 4, 5, 5, 6}));  // batches 1..5 in order
    EXPECT_EQ(test.labels, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(train.name, "cifar10/train");
    for (int64_t i = 0; i < train.n; ++i) expect_pixels(train, i);
    EXPECT_NO_THROW(data::validate(train, "training set"));
  }
}

TEST_F(CifarBinary, Cifar100HasItsFineLabels) {
  put(dir_ / "train.bin", records(4, 96, 2));
  put(dir_ / "test.bin", records(1, 42, 2));
  const auto [train, test] = data::load_train_test("cifar100", dir_.string());
  EXPECT_EQ(train.num_classes, 100);
  EXPECT_EQ(train.labels, (std::vector<int32_t>{96, 97, 98, 99}));
  EXPECT_EQ(test.labels, (std::vector<int32_t>{42}));
  expect_pixels(train, 3);
}

TEST_F(CifarBinary, BrokenSetsAreRefused) {
  cifar10(dir_);
  fs::remove(dir_ / "test_batch.bin");
  EXPECT_EQ(error_of([&] { data::load_train_test("cifar10", dir_.string()); }).first,
            ErrorCode::kMissingInput);
  put(dir_ / "test_batch.bin", records(2, 0, 1) + "x");  // not whole records
  const auto [code, what] = error_of([&] { data::load_train_test("cifar10", dir_.string()); });
  EXPECT_EQ(code, ErrorCode::kBadData);
  EXPECT_NE(what.find("is not a whole number of 3073-byte records"), std::string::npos) << what;
  put(dir_ / "test_batch.bin", records(1, 10, 1));  // label 10 in CIFAR-10
  EXPECT_NE(error_of([&] { data::load_train_test("cifar10", dir_.string()); }).second.find("has label 10"),
            std::string::npos);
  // CIFAR-100's coarse label is checked too
  const fs::path c100 = dir_ / "c100";
  std::string bad = records(1, 3, 2);
  bad[0] = 25;
  put(c100 / "train.bin", bad);
  put(c100 / "test.bin", records(1, 3, 2));
  EXPECT_NE(
      error_of([&] { data::load_train_test("cifar100", c100.string()); }).second.find("coarse label 25"),
      std::string::npos);
  // a file that is neither a folder nor a .tar.gz
  EXPECT_NE(error_of([&] {
              data::load_train_test("cifar10", (dir_ / "data_batch_1.bin").string());
            }).second.find("not a .tar.gz"),
            std::string::npos);
  // a folder without the files: cifar100 refuses it, cifar10 reads it as an image folder (which it is not)
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  EXPECT_NE(
      error_of([&] { data::load_train_test("cifar100", empty.string()); }).second.find("no CIFAR-100 binary"),
      std::string::npos);
  const std::string neither = error_of([&] { data::load_train_test("cifar10", empty.string()); }).second;
  EXPECT_NE(neither.find("nor are the CIFAR-10 binary files there"), std::string::npos) << neither;
}
