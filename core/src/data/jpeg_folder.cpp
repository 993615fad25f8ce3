// Image-folder datasets of JPEGs and PNGs (CIFAR-10 as shipped in ../shared/datasets):
// `<root>/<split>/<class>/*.{jpg,jpeg,png}`, read either from a directory or straight from a .tar.gz of that
// tree (any leading folder inside the archive is accepted), decoded to RGB: JPEGs with libturbojpeg, PNGs
// with libpng (data/png_decode.h). Classes are the sorted class-folder names (labels 0..n-1); samples are
// ordered by class, then file name, so a load is deterministic. Every image must decode and have the size of
// the first; any failure is one fresco::Error naming the file or archive entry. Tested by
// tests/core/test_jpeg_folder.cpp.
#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data/png_decode.h"
#include "data/tar_gz.h"
#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"

namespace fresco::data {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxEntryBytes = uint64_t{64}
                                    << 20;  // one image file; larger is not an image of a dataset
constexpr int kMaxSide = 4096;

struct Entry {
  std::string cls, name;  // class folder, file name
  std::vector<uint8_t> bytes;
};

bool ends_with_lower(const std::string& n, const char* s) {
  const size_t l = std::strlen(s);
  return n.size() >= l && std::equal(n.end() - static_cast<std::ptrdiff_t>(l), n.end(), s,
                                     [](char a, char b) { return std::tolower(a) == b; });
}
bool is_png_name(const std::string& n) {
  return ends_with_lower(n, ".png");
}
bool is_image_name(const std::string& n) {
  return ends_with_lower(n, ".jpg") || ends_with_lower(n, ".jpeg") || is_png_name(n);
}

// Image entries of each of `splits` from one pass over a .tar.gz: a path must end in <split>/<class>/<file>.
std::vector<std::vector<Entry>> read_jpeg_tar_gz(const std::string& archive,
                                                 const std::vector<std::string>& splits) {
  std::vector<std::vector<Entry>> out(splits.size());
  auto split_of = [&](const std::vector<std::string>& parts) {
    return parts.size() >= 3 ? std::find(splits.begin(), splits.end(), parts[parts.size() - 3])
                             : splits.end();
  };
  read_tar_gz(
      archive,
      [&](const std::string& name) {
        const std::vector<std::string> parts = path_components(name);
        return split_of(parts) != splits.end() && is_image_name(parts.back()) ? TarWant::kRead
                                                                              : TarWant::kSkip;
      },
      [&](const std::string& name, std::vector<uint8_t>&& bytes) {
        const std::vector<std::string> parts = path_components(name);
        out[static_cast<size_t>(split_of(parts) - splits.begin())].push_back(
            Entry{parts[parts.size() - 2], parts.back(), std::move(bytes)});
      },
      kMaxEntryBytes, "an image");
  return out;
}

// Image files of `split` from a directory tree <root>/<split>/<class>/<file>.
std::vector<Entry> read_directory(const std::string& root, const std::string& split) {
  const fs::path dir = fs::path(root) / split;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorCode::kMissingInput,
                dir.string() + ": no such directory (expected <root>/" + split + "/<class>/*.jpg or *.png)");
  std::vector<Entry> out;
  for (const auto& cls : fs::directory_iterator(dir)) {
    if (!cls.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(cls.path())) {
      if (!f.is_regular_file() || !is_image_name(f.path().filename().string())) continue;
      const uint64_t size = f.file_size();
      if (size > kMaxEntryBytes)
        throw Error(ErrorCode::kBadData,
                    f.path().string() + ": " + std::to_string(size) + " bytes is too large for an image");
      Entry e{cls.path().filename().string(), f.path().filename().string(), std::vector<uint8_t>(size)};
      std::ifstream in(f.path(), std::ios::binary);
      if (!in.read(reinterpret_cast<char*>(e.bytes.data()), static_cast<std::streamsize>(size)))
        throw Error(ErrorCode::kIo, f.path().string() + ": read failed");
      out.push_back(std::move(e));
    }
  }
  return out;
}

// The entries of each split, from the directory tree or from one pass over the archive.
std::vector<std::vector<Entry>> read_splits(const std::string& path, const std::vector<std::string>& splits) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(ErrorCode::kMissingInput, path + ": no such file or directory");
  if (!fs::is_directory(path, ec)) return read_jpeg_tar_gz(path, splits);
  std::vector<std::vector<Entry>> out;
  for (const std::string& split : splits) out.push_back(read_directory(path, split));
  return out;
}

// Decodes one split's entries into a dataset named name_prefix/split.
Dataset decode(const std::string& path, const std::string& split, std::vector<Entry> entries,
               const std::string& name_prefix) {
  if (entries.empty())
    throw Error(ErrorCode::kBadData,
                path + ": no JPEG or PNG images under " + split + "/<class>/ (expected an image folder)");
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.cls != b.cls ? a.cls < b.cls : a.name < b.name; });
  std::map<std::string, int32_t> classes;
  for (const Entry& e : entries) classes.emplace(e.cls, 0);
  int32_t next = 0;
  for (auto& [cls, label] : classes) label = next++;
  Dataset d;
  d.name = name_prefix + "/" + split;
  d.num_classes = next;
  tjhandle tj = tjInitDecompress();
  if (!tj) throw Error(ErrorCode::kInternal, "libturbojpeg: cannot create a decompressor");
  std::unique_ptr<void, int (*)(tjhandle)> tj_guard(tj, tjDestroy);
  for (const Entry& e : entries) {
    const std::string where = path + ": " + split + "/" + e.cls + "/" + e.name;
    // by content (a PNG named .jpg still decodes), and by name where the content is neither
    const bool png = is_png(e.bytes.data(), e.bytes.size()) || is_png_name(e.name);
    int w = 0, h = 0, sub = 0, cs = 0;
    if (png) {
      const std::string err = png_size(e.bytes.data(), e.bytes.size(), kMaxSide, &w, &h);
      if (!err.empty()) throw Error(ErrorCode::kBadData, where + ": " + err);
    } else if (tjDecompressHeader3(tj, e.bytes.data(), static_cast<unsigned long>(e.bytes.size()), &w, &h,
                                   &sub, &cs) != 0) {
      throw Error(ErrorCode::kBadData, where + ": not a JPEG (" + tjGetErrorStr2(tj) + ")");
    }
    if (w < 1 || h < 1 || w > kMaxSide || h > kMaxSide)
      throw Error(ErrorCode::kBadData, where + ": image size " + std::to_string(w) + "x" + std::to_string(h) +
                                           " outside [1, " + std::to_string(kMaxSide) + "]");
    if (d.n == 0) {
      d.h = h, d.w = w, d.c = 3;
      d.images.reserve(entries.size() * static_cast<size_t>(w * h * 3));
    } else if (h != d.h || w != d.w) {
      throw Error(ErrorCode::kBadData, where + ": " + std::to_string(w) + "x" + std::to_string(h) +
                                           " differs from the first image's " + std::to_string(d.w) + "x" +
                                           std::to_string(d.h));
    }
    const size_t off = d.images.size();
    d.images.resize(off + static_cast<size_t>(w * h * 3));
    if (png) {
      const std::string err = png_decode_rgb(e.bytes.data(), e.bytes.size(), w, h, d.images.data() + off);
      if (!err.empty()) throw Error(ErrorCode::kBadData, where + ": " + err);
    } else if (tjDecompress2(tj, e.bytes.data(), static_cast<unsigned long>(e.bytes.size()),
                             d.images.data() + off, w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) != 0) {
      throw Error(ErrorCode::kBadData, where + ": corrupt JPEG (" + tjGetErrorStr2(tj) + ")");
    }
    d.labels.push_back(classes.at(e.cls));
    ++d.n;
  }
  return d;
}
}  // namespace

Dataset load_jpeg_folder(const std::string& path, const std::string& split, const std::string& name_prefix) {
  return decode(path, split, std::move(read_splits(path, {split})[0]), name_prefix);
}

std::pair<Dataset, Dataset> load_jpeg_folder_train_test(const std::string& path,
                                                        const std::string& name_prefix) {
  std::vector<std::vector<Entry>> e = read_splits(path, {"train", "test"});
  // The labels are the classes' indices in each split's sorted names, so both splits must name the same
  // classes (the same count is not enough: test/c would be scored as train's b).
  std::set<std::string> names[2];
  for (int i = 0; i < 2; ++i)
    for (const Entry& entry : e[static_cast<size_t>(i)]) names[i].insert(entry.cls);
  for (int i = 0; i < 2; ++i)
    for (const std::string& cls : names[i])
      FRESCO_CHECK(names[1 - i].count(cls) || names[1 - i].empty(), ErrorCode::kBadData,
                   path + ": class '" + cls + "' has images under " + (i ? "test" : "train") +
                       "/ but not under " + (i ? "train" : "test") +
                       "/ (both splits must name the same classes)");
  return {decode(path, "train", std::move(e[0]), name_prefix),
          decode(path, "test", std::move(e[1]), name_prefix)};
}

}  // namespace fresco::data
