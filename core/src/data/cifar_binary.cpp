// CIFAR-10 and CIFAR-100 in their binary versions (https://www.cs.toronto.edu/~kriz/cifar.html): records of
// a label byte (CIFAR-100: the coarse then the fine label) and 3072 pixel bytes, the red, green and blue
// 32x32 planes; CIFAR-10's training set is data_batch_1.bin .. data_batch_5.bin in that order, its test set
// test_batch.bin; CIFAR-100's are train.bin and test.bin (fine labels, 100 classes). Read from a folder that
// holds the files (or whose one subfolder does, as the archives unpack) or straight from the .tar.gz, into
// HWC bytes. Tested by tests/core/test_cifar_binary.cpp.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "data/tar_gz.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"

namespace fresco::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSide = 32, kPixels = kSide * kSide * 3;
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 31;  // 50,000 records are 154 MB

struct Layout {
  std::vector<std::string> train, test;
  int64_t label_bytes;  // CIFAR-10: 1; CIFAR-100: 2 (coarse, fine)
  int32_t classes;
};

Layout layout_of(bool cifar100) {
  if (cifar100) return {{"train.bin"}, {"test.bin"}, 2, 100};
  return {
      {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
      {"test_batch.bin"},
      1,
      10};
}

// The folder holding the files: path itself or its one subfolder that has the first training file.
fs::path folder_of(const fs::path& root, const Layout& l) {
  std::error_code ec;
  if (fs::exists(root / l.train[0], ec)) return root;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && fs::exists(e.path() / l.train[0], ec)) return e.path();
  return {};
}

std::vector<uint8_t> read_whole(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    throw Error(ErrorCode::kMissingInput, p.string() + ": no such file (a CIFAR binary set needs it)");
  const uint64_t size = fs::file_size(p, ec);
  if (size > kMaxFileBytes) throw Error(ErrorCode::kBadData, p.string() + ": too large for a CIFAR batch");
  std::vector<uint8_t> b(static_cast<size_t>(size));
  std::ifstream in(p, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(size)))
    throw Error(ErrorCode::kIo, p.string() + ": read failed");
  return b;
}

// The records of `files` (in order) as one dataset; `where` names the folder or archive in errors.
Dataset decode(const std::string& where, const std::vector<std::string>& files,
               const std::map<std::string, std::vector<uint8_t>>& bytes, const Layout& l,
               const std::string& name) {
  Dataset d;
  d.name = name;
  d.h = d.w = kSide, d.c = 3;
  d.num_classes = l.classes;
  const int64_t rec = l.label_bytes + kPixels;
  for (const std::string& f : files) {
    const auto it = bytes.find(f);
    if (it == bytes.end())
      throw Error(ErrorCode::kMissingInput, where + ": no " + f + " (a CIFAR binary set needs it)");
    const std::vector<uint8_t>& b = it->second;
    if (b.empty() || b.size() % static_cast<size_t>(rec) != 0)
      throw Error(ErrorCode::kBadData, where + ": " + f + ": " + std::to_string(b.size()) +
                                           " bytes is not a whole number of " + std::to_string(rec) +
                                           "-byte records");
    const int64_t n = static_cast<int64_t>(b.size()) / rec;
    const size_t at = d.images.size();
    d.images.resize(at + static_cast<size_t>(n * kPixels));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* r = b.data() + i * rec;
      const int32_t label = r[l.label_bytes - 1];  // CIFAR-100: the fine label
      if (label >= l.classes)
        throw Error(ErrorCode::kBadData, where + ": " + f + ": record " + std::to_string(i) + " has label " +
                                             std::to_string(label) + " (expected below " +
                                             std::to_string(l.classes) + ")");
      if (l.label_bytes == 2 && r[0] >= 20)
        throw Error(ErrorCode::kBadData, where + ": " + f + ": record " + std::to_string(i) +
                                             " has coarse label " + std::to_string(r[0]) +
                                             " (expected below 20)");
      d.labels.push_back(label);
      uint8_t* img = d.images.data() + at + static_cast<size_t>(i * kPixels);
      const uint8_t* planes = r + l.label_bytes;  // R, G, B planes -> HWC
      for (int64_t p = 0; p < kSide * kSide; ++p)
        for (int64_t ch = 0; ch < 3; ++ch) img[p * 3 + ch] = planes[ch * kSide * kSide + p];
    }
    d.n += n;
  }
  return d;
}

}  // namespace

bool load_cifar_binary(const std::string& path, bool cifar100, const std::string& name_prefix,
                       std::pair<Dataset, Dataset>* out) {
  const Layout l = layout_of(cifar100);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorCode::kMissingInput, path + ": no such file or directory");
  std::map<std::string, std::vector<uint8_t>> bytes;
  std::vector<std::string> all = l.train;
  all.insert(all.end(), l.test.begin(), l.test.end());
  if (fs::is_directory(path, ec)) {
    const fs::path dir = folder_of(path, l);
    if (dir.empty()) return false;
    for (const std::string& f : all) bytes[f] = read_whole(dir / f);
  } else {
    bool jpeg = false;
    read_tar_gz(
        path,
        [&](const std::string& name) {
          const std::string base = path_components(name).empty() ? "" : path_components(name).back();
          if (std::find(all.begin(), all.end(), base) != all.end()) return TarWant::kRead;
          const std::string ext = base.size() > 4 ? base.substr(base.size() - 4) : "";
          const bool is_image = ext == ".jpg" || ext == ".JPG" || ext == ".png" || ext == ".PNG";
          if (is_image && bytes.empty()) jpeg = true;
          return jpeg ? TarWant::kStop : TarWant::kSkip;  // an image folder: not a binary set
        },
        [&](const std::string& name, std::vector<uint8_t>&& b) {
          bytes[path_components(name).back()] = std::move(b);
        },
        kMaxFileBytes, "a CIFAR batch");
    if (bytes.empty()) return false;
  }
  *out = {decode(path, l.train, bytes, l, name_prefix + "/train"),
          decode(path, l.test, bytes, l, name_prefix + "/test")};
  return true;
}

}  // namespace fresco::data
