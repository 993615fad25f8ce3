// Image-folder datasets of JPEGs (CIFAR-10 as shipped in ../shared/datasets): `<root>/<split>/<class>/*.jpg`,
// read either from a directory or straight from a .tar.gz of that tree (any leading folder inside the archive
// is accepted), decoded with libturbojpeg to RGB. Classes are the sorted class-folder names (labels 0..n-1);
// samples are ordered by class, then file name, so a load is deterministic. Every image must decode and have
// the size of the first; any failure is one fresco::Error naming the file or archive entry. Tested by
// tests/core/test_jpeg_folder.cpp.
#include <turbojpeg.h>
#include <zlib.h>

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

bool is_jpeg_name(const std::string& n) {
  auto ends = [&](const char* s) {
    const size_t l = std::strlen(s);
    return n.size() >= l && std::equal(n.end() - static_cast<std::ptrdiff_t>(l), n.end(), s,
                                       [](char a, char b) { return std::tolower(a) == b; });
  };
  return ends(".jpg") || ends(".jpeg");
}

// Splits an archive path into components ("a/b/c" -> {a, b, c}), ignoring empty ones and ".".
std::vector<std::string> components(const std::string& p) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= p.size()) {
    const size_t j = p.find('/', i);
    const std::string c = p.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!c.empty() && c != ".") out.push_back(c);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

uint64_t octal(const char* f, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && f[i]; ++i) {
    if (f[i] == ' ') continue;
    if (f[i] < '0' || f[i] > '7') return UINT64_MAX;
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  return v;
}

// Reads exactly n bytes from a gzip stream (a short read is a truncated or corrupt archive).
void gz_read(gzFile g, void* dst, size_t n, const std::string& archive) {
  size_t got = 0;
  while (got < n) {
    const int r =
        gzread(g, static_cast<char*>(dst) + got, static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30)));
    if (r <= 0) {
      int err = 0;
      const char* msg = gzerror(g, &err);
      throw Error(ErrorCode::kBadData,
                  archive + ": truncated or corrupt archive" +
                      (err != Z_OK && msg ? std::string(" (") + msg + ")" : std::string()));
    }
    got += static_cast<size_t>(r);
  }
}

// JPEG entries of each of `splits` from one pass over a .tar.gz: a path must end in <split>/<class>/<file>.
std::vector<std::vector<Entry>> read_tar_gz(const std::string& archive,
                                            const std::vector<std::string>& splits) {
  gzFile g = gzopen(archive.c_str(), "rb");
  if (!g) throw Error(ErrorCode::kIo, archive + ": cannot open");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(g, gzclose);
  std::vector<std::vector<Entry>> out(splits.size());
  char h[512];
  std::string long_name;
  for (;;) {
    const int r = gzread(g, h, 512);
    if (r == 0) break;  // end of stream without the two zero blocks: accepted
    if (r != 512) throw Error(ErrorCode::kBadData, archive + ": truncated tar header");
    if (std::all_of(h, h + 512, [](char c) { return c == 0; })) break;  // end-of-archive block
    const uint64_t size = octal(h + 124, 12);
    if (size == UINT64_MAX) throw Error(ErrorCode::kBadData, archive + ": malformed tar header (size field)");
    const char type = h[156];
    const uint64_t padded = (size + 511) / 512 * 512;
    std::string name = long_name.empty() ? std::string(h, strnlen(h, 100)) : long_name;
    if (long_name.empty() && std::memcmp(h + 257, "ustar", 5) == 0 && h[345])  // ustar prefix field
      name = std::string(h + 345, strnlen(h + 345, 155)) + "/" + name;
    long_name.clear();
    if (type == 'L') {  // GNU long name: the next header's name
      if (size > 4096) throw Error(ErrorCode::kBadData, archive + ": tar long name too long");
      std::vector<char> buf(padded);
      gz_read(g, buf.data(), padded, archive);
      long_name.assign(buf.data(), strnlen(buf.data(), size));
      continue;
    }
    const std::vector<std::string> parts = components(name);
    const auto split =
        parts.size() >= 3 ? std::find(splits.begin(), splits.end(), parts[parts.size() - 3]) : splits.end();
    const bool wanted = (type == '0' || type == '\0') && split != splits.end() && is_jpeg_name(parts.back());
    if (!wanted) {
      std::vector<char> skip(std::min<uint64_t>(padded, 1u << 20));
      for (uint64_t left = padded; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, skip.size()));
        gz_read(g, skip.data(), n, archive);
        left -= n;
      }
      continue;
    }
    if (size > kMaxEntryBytes)
      throw Error(ErrorCode::kBadData,
                  archive + ": " + name + ": " + std::to_string(size) + " bytes is too large for an image");
    Entry e{parts[parts.size() - 2], parts.back(), std::vector<uint8_t>(static_cast<size_t>(padded))};
    gz_read(g, e.bytes.data(), e.bytes.size(), archive);
    e.bytes.resize(static_cast<size_t>(size));
    out[static_cast<size_t>(split - splits.begin())].push_back(std::move(e));
  }
  return out;
}

// JPEG files of `split` from a directory tree <root>/<split>/<class>/<file>.
std::vector<Entry> read_directory(const std::string& root, const std::string& split) {
  const fs::path dir = fs::path(root) / split;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(ErrorCode::kMissingInput,
                dir.string() + ": no such directory (expected <root>/" + split + "/<class>/*.jpg)");
  std::vector<Entry> out;
  for (const auto& cls : fs::directory_iterator(dir)) {
    if (!cls.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(cls.path())) {
      if (!f.is_regular_file() || !is_jpeg_name(f.path().filename().string())) continue;
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
  if (!fs::is_directory(path, ec)) return read_tar_gz(path, splits);
  std::vector<std::vector<Entry>> out;
  for (const std::string& split : splits) out.push_back(read_directory(path, split));
  return out;
}

// Decodes one split's entries into a dataset named name_prefix/split.
Dataset decode(const std::string& path, const std::string& split, std::vector<Entry> entries,
               const std::string& name_prefix) {
  if (entries.empty())
    throw Error(ErrorCode::kBadData,
                path + ": no JPEG images under " + split + "/<class>/ (expected an image folder)");
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
    int w = 0, h = 0, sub = 0, cs = 0;
    if (tjDecompressHeader3(tj, e.bytes.data(), static_cast<unsigned long>(e.bytes.size()), &w, &h, &sub,
                            &cs) != 0)
      throw Error(ErrorCode::kBadData, where + ": not a JPEG (" + tjGetErrorStr2(tj) + ")");
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
    if (tjDecompress2(tj, e.bytes.data(), static_cast<unsigned long>(e.bytes.size()), d.images.data() + off,
                      w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT) != 0)
      throw Error(ErrorCode::kBadData, where + ": corrupt JPEG (" + tjGetErrorStr2(tj) + ")");
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
