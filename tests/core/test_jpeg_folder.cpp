// JPEG image-folder datasets (data::load_jpeg_folder): a directory and a .tar.gz of the same tree load the
// same bytes and labels (sorted class folders, then file names); mixed sizes, a file that is not a JPEG, an
// empty tree, a missing path and a truncated archive are one clear error each; and the shipped CIFAR-10 copy
// (../shared/datasets/cifar10-jpeg.tar.gz, when present) loads as 50,000 + 10,000 32x32 RGB images in 10
// balanced classes.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "image_folder_files.h"
#include "temp_dir.h"

using namespace fresco;
namespace fs = std::filesystem;

namespace {
using test::File;
using test::make_jpeg;
using test::TempDir;
using test::write_tar_gz;
using test::write_tree;

// The error code of loading `path` (kInternal stands for "no error", which the tests never expect).
ErrorCode error_of(const std::string& path, const std::string& split, std::string* what = nullptr) {
  try {
    data::load_jpeg_folder(path, split, "t");
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return ErrorCode::kInternal;
}
}  // namespace

TEST(JpegFolder, DirectoryAndTarGzLoadTheSameSortedDataset) {
  const std::vector<File> files = {{"train/dog/b.jpg", make_jpeg(6, 5, 1)},
                                   {"train/cat/z.jpg", make_jpeg(6, 5, 2)},
                                   {"train/cat/a.jpg", make_jpeg(6, 5, 3)},
                                   {"test/dog/x.jpg", make_jpeg(6, 5, 4)},
                                   {"train/cat/notes.txt", {'h', 'i'}}};  // not an image: ignored
  const TempDir tmp_dir, tmp_tgz;
  const fs::path dir = tmp_dir.path();
  write_tree(dir, files);
  const fs::path tgz = tmp_tgz.path() / "set.tar.gz";
  write_tar_gz(tgz, "set", files);
  const data::Dataset a = data::load_jpeg_folder(dir.string(), "train", "t");
  const data::Dataset b = data::load_jpeg_folder(tgz.string(), "train", "t");
  EXPECT_EQ(a.n, 3);
  EXPECT_EQ(a.h, 5);
  EXPECT_EQ(a.w, 6);
  EXPECT_EQ(a.c, 3);
  EXPECT_EQ(a.num_classes, 2);
  EXPECT_EQ(a.labels, (std::vector<int32_t>{0, 0, 1}));  // cat/a, cat/z, dog/b
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  // the pixels are the JPEG's decode: the second image (cat/z) is make_jpeg(.., 2) decoded by turbojpeg
  const std::vector<uint8_t> z = make_jpeg(6, 5, 2);
  std::vector<uint8_t> px(90);
  tjhandle tj = tjInitDecompress();
  ASSERT_EQ(tjDecompress2(tj, z.data(), z.size(), px.data(), 6, 0, 5, TJPF_RGB, TJFLAG_ACCURATEDCT), 0);
  tjDestroy(tj);
  EXPECT_TRUE(std::equal(px.begin(), px.end(), a.images.begin() + 90));
  EXPECT_EQ(data::load_jpeg_folder(tgz.string(), "test", "t").n, 1);
}

TEST(JpegFolder, BadInputsAreOneClearErrorEach) {
  std::string what;
  const TempDir tmp_mixed, tmp_notjpeg, tmp_empty;
  const fs::path mixed = tmp_mixed.path();
  write_tree(mixed, {{"train/a/1.jpg", make_jpeg(4, 4, 1)}, {"train/a/2.jpg", make_jpeg(5, 4, 2)}});
  EXPECT_EQ(error_of(mixed.string(), "train", &what), ErrorCode::kBadData);
  EXPECT_NE(what.find("train/a/2.jpg: 5x4 differs from the first image's 4x4"), std::string::npos) << what;
  const fs::path notjpeg = tmp_notjpeg.path();
  write_tree(notjpeg, {{"train/a/1.jpg", {'n', 'o', 'p', 'e'}}});
  EXPECT_EQ(error_of(notjpeg.string(), "train", &what), ErrorCode::kBadData);
  EXPECT_NE(what.find("train/a/1.jpg: not a JPEG"), std::string::npos) << what;
  EXPECT_EQ(error_of(notjpeg.string(), "test", &what), ErrorCode::kMissingInput);  // no test/ folder
  EXPECT_EQ(error_of((notjpeg / "absent.tar.gz").string(), "train"), ErrorCode::kMissingInput);
  const fs::path empty = tmp_empty.path();
  write_tar_gz(empty / "e.tar.gz", "e", {{"train/a/readme.txt", {'x'}}});
  EXPECT_EQ(error_of((empty / "e.tar.gz").string(), "train", &what), ErrorCode::kBadData);
  EXPECT_NE(what.find("no JPEG or PNG images under train/<class>/"), std::string::npos) << what;
  write_tar_gz(empty / "cut.tar.gz", "c", {{"train/a/1.jpg", make_jpeg(4, 4, 1)}}, 1024 + 300);
  EXPECT_EQ(error_of((empty / "cut.tar.gz").string(), "train", &what), ErrorCode::kBadData);
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;
}

// Both splits from one pass over the archive equal the two single-split loads; splits that do not name the
// same classes (fewer, or as many but others) are one kBadData error.
TEST(JpegFolder, TrainAndTestFromOnePass) {
  const TempDir tmp;
  const std::vector<File> files = {{"train/cat/a.jpg", make_jpeg(4, 3, 1)},
                                   {"train/dog/b.jpg", make_jpeg(4, 3, 2)},
                                   {"test/dog/c.jpg", make_jpeg(4, 3, 3)},
                                   {"test/cat/d.jpg", make_jpeg(4, 3, 4)}};
  const std::string tgz = (tmp.path() / "s.tar.gz").string();
  write_tar_gz(tgz, "s", files);
  const auto [train, test] = data::load_jpeg_folder_train_test(tgz, "t");
  const data::Dataset train1 = data::load_jpeg_folder(tgz, "train", "t");
  const data::Dataset test1 = data::load_jpeg_folder(tgz, "test", "t");
  EXPECT_EQ(train.images, train1.images);
  EXPECT_EQ(train.labels, train1.labels);
  EXPECT_EQ(test.images, test1.images);
  EXPECT_EQ(test.labels, test1.labels);
  EXPECT_EQ(test.name, "t/test");
  auto expect_refused = [&](const std::vector<File>& tree, const std::string& message) {
    write_tar_gz(tgz, "s", tree);
    try {
      data::load_jpeg_folder_train_test(tgz, "t");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadData);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  // test has one class, train two
  expect_refused({files[0], files[1], files[2]}, "class 'cat' has images under train/ but not under test/");
  // as many classes, but test/emu would be scored as train's dog
  expect_refused({files[0], files[1], files[3], {"test/emu/e.jpg", make_jpeg(4, 3, 5)}},
                 "class 'dog' has images under train/ but not under test/");
}

TEST(JpegFolder, ShippedCifar10Loads) {
  const std::string path =
      std::string(FRESCO_TEST_DATA_DIR) + "/../../../shared/datasets/cifar10-jpeg.tar.gz";
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  const data::Dataset train = data::load_jpeg_folder(path, "train", "cifar10");
  const data::Dataset test = data::load_jpeg_folder(path, "test", "cifar10");
  EXPECT_EQ(train.n, 50000);
  EXPECT_EQ(test.n, 10000);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.h, 32);
  EXPECT_EQ(train.w, 32);
  EXPECT_EQ(train.c, 3);
  std::vector<int> per_class(10, 0);
  for (int32_t l : train.labels) ++per_class[static_cast<size_t>(l)];
  EXPECT_EQ(per_class, std::vector<int>(10, 5000));
  double mean = 0;  // CIFAR-10's mean pixel is about 0.47 * 255
  for (uint8_t v : train.images) mean += v;
  mean /= static_cast<double>(train.images.size());
  EXPECT_NEAR(mean, 120.7, 5.0);
}
