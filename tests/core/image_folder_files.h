// Image-folder trees for the dataset tests (test_jpeg_folder.cpp, test_png_folder.cpp): JPEGs of random
// pixels, files written as a directory tree or as a gzip-compressed ustar archive.
#pragma once

#include <turbojpeg.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fresco::test {

namespace fs = std::filesystem;

inline std::vector<uint8_t> make_jpeg(int w, int h, uint32_t seed) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w * h * 3));
  std::mt19937 rng(seed);
  for (auto& b : rgb) b = static_cast<uint8_t>(rng());
  tjhandle tj = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &out, &size, TJSAMP_444, 95, 0), 0);
  std::vector<uint8_t> jpg(out, out + size);
  tjFree(out);
  tjDestroy(tj);
  return jpg;
}

struct File {
  std::string path;  // inside the tree, e.g. "train/cat/1.jpg"
  std::vector<uint8_t> bytes;
};

inline void write_tree(const fs::path& root, const std::vector<File>& files) {
  for (const File& f : files) {
    fs::create_directories((root / f.path).parent_path());
    std::ofstream(root / f.path, std::ios::binary)
        .write(reinterpret_cast<const char*>(f.bytes.data()), static_cast<std::streamsize>(f.bytes.size()));
  }
}

// A ustar archive of `files` under folder `top`, gzip-compressed; `cut` bytes are dropped from the end.
inline void write_tar_gz(const fs::path& file, const std::string& top, const std::vector<File>& files,
                         size_t cut = 0) {
  std::vector<char> tar;
  for (const File& f : files) {
    char h[512] = {};
    std::snprintf(h, 100, "%s/%s", top.c_str(), f.path.c_str());
    std::snprintf(h + 100, 8, "0000644");
    std::snprintf(h + 124, 12, "%011o", static_cast<unsigned>(f.bytes.size()));
    h[156] = '0';
    std::memcpy(h + 257, "ustar", 5);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : h) sum += static_cast<unsigned char>(c);
    std::snprintf(h + 148, 8, "%06o", sum);
    tar.insert(tar.end(), h, h + 512);
    tar.insert(tar.end(), f.bytes.begin(), f.bytes.end());
    tar.resize((tar.size() + 511) / 512 * 512, 0);
  }
  tar.resize(tar.size() + 1024, 0);
  tar.resize(tar.size() - cut);
  gzFile g = gzopen(file.string().c_str(), "wb");
  gzwrite(g, tar.data(), static_cast<unsigned>(tar.size()));
  gzclose(g);
}

}  // namespace fresco::test
