// IDX reader, MNIST directory loader and epoch shuffle (core/src/data/). Every test writes crafted raw or
// gzip files into its own fresh temp directory (removed afterwards) and checks both round trips and that each
// kind of bad input gives one fresco::Error with the right code and a message naming the file and
// expected/found values. The real Fashion-MNIST files are loaded from /usr/share/datasets/fashion-mnist when
// present (skipped if not).
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;
using fresco::ErrorCode;
using fresco::data::Dataset;
using fresco::data::IdxArray;
using Bytes = std::vector<uint8_t>;

using fresco::test::TempDir;

void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

Bytes idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b;
  put_be32(b, magic);
  for (uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile g = gzopen(path.c_str(), "wb");
  ASSERT_NE(g, nullptr) << path;
  size_t done = 0;
  while (done < bytes.size()) {
    const unsigned n = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, size_t{1} << 20));
    ASSERT_EQ(gzwrite(g, bytes.data() + done, n), static_cast<int>(n)) << path;
    done += n;
  }
  ASSERT_EQ(gzclose(g), Z_OK) << path;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs f, expects a fresco::Error of `code` whose one-line message contains every part; returns the message.
template <class F>
std::string expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const fresco::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << msg;
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << msg << "' lacks '" << p << "'";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected fresco::Error, got std::exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected fresco::Error, nothing was thrown";
  return "";
}

// A valid tiny pair: 5 images of 3x4, labels in 0..9.
constexpr uint32_t kN = 5, kH = 3, kW = 4;
const Bytes kLabels = {0, 1, 2, 9, 4};

Bytes pixels(size_t count, uint32_t salt = 0) {
  Bytes p(count);
  uint32_t x = 12345u + salt;
  for (auto& v : p) {
    x = x * 1664525u + 1013904223u;  // LCG: deterministic and incompressible
    v = static_cast<uint8_t>(x >> 24);
  }
  return p;
}

Bytes images_file(const Bytes& px) {
  return idx_bytes(0x803, {kN, kH, kW}, px);
}
Bytes labels_file(const Bytes& lab) {
  return idx_bytes(0x801, {static_cast<uint32_t>(lab.size())}, lab);
}

class IdxReader : public ::testing::Test {
 protected:
  TempDir dir_;
};

void expect_tiny(const Dataset& d, const Bytes& px, const std::string& name) {
  EXPECT_EQ(d.name, name);
  EXPECT_EQ(d.n, kN);
  EXPECT_EQ(d.h, kH);
  EXPECT_EQ(d.w, kW);
  EXPECT_EQ(d.c, 1);
  EXPECT_EQ(d.sample_bytes(), kH * kW);
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.images, px);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 1, 2, 9, 4}));
}

TEST_F(IdxReader, RawRoundTrip) {
  const Bytes px = pixels(kN * kH * kW);
  write_raw(dir_.file("img"), images_file(px));
  write_raw(dir_.file("lab"), labels_file(kLabels));
  const IdxArray a = fresco::data::read_idx(dir_.file("img"), 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{kN, kH, kW}));
  EXPECT_EQ(a.data, px);
  expect_tiny(fresco::data::load_idx_pair(dir_.file("img"), dir_.file("lab"), 10, "tiny/train"), px,
              "tiny/train");
}

TEST_F(IdxReader, GzipRoundTrip) {
  const Bytes px = pixels(kN * kH * kW);
  write_gz(dir_.file("img.gz"), images_file(px));
  write_gz(dir_.file("lab.gz"), labels_file(kLabels));
  const Bytes gz = read_file(dir_.file("img.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz[0], 0x1f);
  EXPECT_EQ(gz[1], 0x8b);
  expect_tiny(fresco::data::load_idx_pair(dir_.file("img.gz"), dir_.file("lab.gz"), 10, "tiny/test"), px,
              "tiny/test");
}

TEST_F(IdxReader, GzipMultiMemberIsOneStream) {
  const Bytes px = pixels(kN * kH * kW);
  const Bytes whole = images_file(px);
  const Bytes first(whole.begin(), whole.begin() + 20), second(whole.begin() + 20, whole.end());
  write_gz(dir_.file("a.gz"), first);
  write_gz(dir_.file("b.gz"), second);
  Bytes cat = read_file(dir_.file("a.gz"));
  const Bytes b = read_file(dir_.file("b.gz"));
  cat.insert(cat.end(), b.begin(), b.end());
  write_raw(dir_.file("img.gz"), cat);
  EXPECT_EQ(fresco::data::read_idx(dir_.file("img.gz"), 3).data, px);
}

TEST_F(IdxReader, MissingFile) {
  const std::string p = dir_.file("nope-idx3-ubyte");
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kMissingInput, {p, "no such file"});
  const Bytes px = pixels(kN * kH * kW);
  write_raw(dir_.file("img"), images_file(px));
  expect_error([&] { fresco::data::load_idx_pair(dir_.file("img"), p, 10, "x"); }, ErrorCode::kMissingInput,
               {p});
}

TEST_F(IdxReader, DirectoryIsNotAFile) {
  const std::string p = dir_.path().string();
  expect_error([&] { fresco::data::read_idx(p, 1); }, ErrorCode::kBadData, {p, "directory"});
}

TEST_F(IdxReader, TruncatedHeader) {
  for (const bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "raw");
    const std::string p = dir_.file(gz ? "h.gz" : "h");
    auto write = [&](const Bytes& b) { gz ? write_gz(p, b) : write_raw(p, b); };
    write({});
    expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
                 {p, "truncated header", "expected at least 4 bytes", "found 0"});
    write({0, 0, 8, 3, 0, 0, 0, 5, 0, 0});
    expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
                 {p, "truncated header", "expected 16 bytes", "found 10"});
  }
}

TEST_F(IdxReader, BadMagic) {
  const std::string p = dir_.file("m");
  write_raw(p, idx_bytes(0x01000803, {kN, kH, kW}, pixels(60)));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "bad IDX magic 0x01000803 (expected 0x00000803 for 3-d unsigned-byte images)"});
  write_raw(p, idx_bytes(0x00000D03, {kN, kH, kW}, Bytes(240)));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "bad IDX magic 0x00000d03 (expected 0x00000803", "float32"});
  write_raw(p, idx_bytes(0x00000901, {5}, kLabels));
  expect_error([&] { fresco::data::read_idx(p, 1); }, ErrorCode::kBadData,
               {p, "bad IDX magic 0x00000901 (expected 0x00000801 for 1-d unsigned-byte labels)"});
  write_raw(p, {'P', 'K', 3, 4, 0, 0, 0, 0});  // a zip file, say
  expect_error([&] { fresco::data::read_idx(p, 1); }, ErrorCode::kBadData, {p, "bad IDX magic 0x504b0304"});
}

TEST_F(IdxReader, NdimMismatch) {
  const Bytes px = pixels(kN * kH * kW);
  write_raw(dir_.file("img"), images_file(px));
  write_raw(dir_.file("lab"), labels_file(kLabels));
  expect_error([&] { fresco::data::read_idx(dir_.file("img"), 1); }, ErrorCode::kBadData,
               {dir_.file("img"), "0x00000803", "ndim (byte 3) is 3, expected 1"});
  // Files swapped by the caller: the images argument names the labels file.
  expect_error([&] { fresco::data::load_idx_pair(dir_.file("lab"), dir_.file("img"), 10, "x"); },
               ErrorCode::kBadData,
               {dir_.file("lab"), "expected 0x00000803", "ndim (byte 3) is 1, expected 3"});
}

TEST_F(IdxReader, ZeroDimension) {
  const std::string p = dir_.file("z");
  write_raw(p, idx_bytes(0x803, {kN, 0, kW}, {}));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "dimension 1 (height) is 0", "expected >= 1"});
  write_raw(p, idx_bytes(0x801, {0}, {}));
  expect_error([&] { fresco::data::read_idx(p, 1); }, ErrorCode::kBadData,
               {p, "dimension 0 (count) is 0", "expected >= 1"});
}

TEST_F(IdxReader, AbsurdDimensions) {
  const std::string p = dir_.file("big");
  write_raw(p, idx_bytes(0x803, {(1u << 24) + 1, 1, 1}, {}));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "dimension 0 (count) is 16777217", "expected <= 16777216"});
  write_raw(p, idx_bytes(0x801, {0xffffffffu}, {}));
  expect_error([&] { fresco::data::read_idx(p, 1); }, ErrorCode::kBadData,
               {p, "dimension 0 (count) is 4294967295", "expected <= 16777216"});
  write_raw(p, idx_bytes(0x803, {1, 3, 5000}, {}));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "dimension 2 (width) is 5000", "expected <= 4096"});
  write_raw(p, idx_bytes(0x803, {1, 4097, 3}, {}));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "dimension 1 (height) is 4097", "expected <= 4096"});
  write_raw(p, idx_bytes(0x803, {1u << 24, 4096, 4096}, {}));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "16777216 x 4096 x 4096", "expected <= 4294967296"});
}

// A header that promises the maximum (2^32 bytes) over a tiny file must fail fast, without allocating 4 GiB.
TEST_F(IdxReader, HugePromiseTinyFile) {
  for (const bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "raw");
    const std::string p = dir_.file(gz ? "huge.gz" : "huge");
    const Bytes b = idx_bytes(0x803, {1u << 20, 64, 64}, pixels(10));
    gz ? write_gz(p, b) : write_raw(p, b);
    expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
                 {p, "truncated: header promises 4294967296 bytes of data, found 10"});
  }
}

TEST_F(IdxReader, TruncatedData) {
  Bytes b = images_file(pixels(kN * kH * kW));
  b.pop_back();
  for (const bool gz : {false, true}) {
    SCOPED_TRACE(gz ? "gzip" : "raw");
    const std::string p = dir_.file(gz ? "t.gz" : "t");
    gz ? write_gz(p, b) : write_raw(p, b);
    expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
                 {p, "truncated: header promises 60 bytes of data, found 59"});
  }
  const std::string lab = dir_.file("lab");
  write_raw(lab, idx_bytes(0x801, {6}, kLabels));
  expect_error([&] { fresco::data::read_idx(lab, 1); }, ErrorCode::kBadData,
               {lab, "header promises 6 bytes of data, found 5"});
}

TEST_F(IdxReader, TrailingGarbage) {
  Bytes b = images_file(pixels(kN * kH * kW));
  b.push_back(0);
  const std::string raw = dir_.file("g"), gz = dir_.file("g.gz");
  write_raw(raw, b);
  expect_error([&] { fresco::data::read_idx(raw, 3); }, ErrorCode::kBadData,
               {raw, "trailing garbage: header promises 60 bytes of data, found 61"});
  write_gz(gz, b);
  expect_error([&] { fresco::data::read_idx(gz, 3); }, ErrorCode::kBadData,
               {gz, "trailing garbage: header promises 60 bytes of data, found more", "at least 61"});
  // Bytes after the end of a valid gzip member that are not another member.
  b.pop_back();
  write_gz(gz, b);
  Bytes file = read_file(gz);
  const size_t end = file.size();
  file.insert(file.end(), {'j', 'u', 'n', 'k'});
  write_raw(gz, file);
  expect_error([&] { fresco::data::read_idx(gz, 3); }, ErrorCode::kBadData,
               {gz, "trailing garbage after the gzip stream", "offset " + std::to_string(end), "found 0x6a"});
}

// A gzip bomb: a tiny .gz whose stream inflates to 64 MiB. Reading stops one byte past the promise.
TEST_F(IdxReader, GzipBombStopsEarly) {
  Bytes b = images_file(pixels(kN * kH * kW));
  b.resize(b.size() + (size_t{64} << 20), 0);
  const std::string p = dir_.file("bomb.gz");
  write_gz(p, b);
  EXPECT_LT(fs::file_size(p), size_t{1} << 20);
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "trailing garbage: header promises 60 bytes of data, found more"});
}

TEST_F(IdxReader, CorruptGzip) {
  const std::string p = dir_.file("c.gz");
  write_gz(p, images_file(pixels(kN * kH * kW)));
  const Bytes good = read_file(p);
  ASSERT_GT(good.size(), 18u);
  Bytes bad = good;
  bad[bad.size() - 8] ^= 0xff;  // CRC-32 of the trailer
  write_raw(p, bad);
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "corrupt gzip stream", "zlib: incorrect data check"});
  bad = good;
  bad[bad.size() - 1] ^= 0x01;  // ISIZE of the trailer
  write_raw(p, bad);
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "zlib: incorrect length check"});
  bad = good;
  bad[10] |= 0x06;  // first deflate block: reserved block type 11
  write_raw(p, bad);
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData, {p, "zlib: invalid block type"});
  bad = good;
  bad[2] = 7;  // compression method other than deflate
  write_raw(p, bad);
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "zlib: unknown compression method"});
}

TEST_F(IdxReader, CutGzipFile) {
  const size_t n = 200 * 28 * 28;
  const std::string p = dir_.file("cut.gz");
  write_gz(p, idx_bytes(0x803, {200, 28, 28}, pixels(n)));
  const Bytes good = read_file(p);
  write_raw(p, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "truncated: header promises 156800 bytes of data, found", "the gzip stream ends early"});
  // Only the 8-byte trailer is missing: all data arrived, but the file is still damaged.
  write_raw(p, Bytes(good.begin(), good.end() - 8));
  expect_error([&] { fresco::data::read_idx(p, 3); }, ErrorCode::kBadData,
               {p, "truncated gzip stream", "all 156800 bytes of data are present"});
}

// Every single-byte corruption of a small raw and gzip file is either read correctly or rejected with a
// fresco::Error; nothing crashes, hangs or throws anything else.
TEST_F(IdxReader, ByteFlipFuzzNeverCrashes) {
  const Bytes px = pixels(kN * kH * kW);
  const std::string raw = dir_.file("f"), gz = dir_.file("f.gz");
  write_gz(gz, images_file(px));
  const Bytes sources[2] = {images_file(px), read_file(gz)};
  int rejected = 0;
  for (int s = 0; s < 2; ++s) {
    const std::string& p = s == 0 ? raw : gz;
    for (size_t i = 0; i < sources[s].size(); ++i) {
      for (const uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
        Bytes b = sources[s];
        b[i] ^= mask;
        write_raw(p, b);
        try {
          const IdxArray a = fresco::data::read_idx(p, 3);
          EXPECT_EQ(a.data.size(), size_t{kN * kH * kW});
        } catch (const fresco::Error&) {
          ++rejected;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "byte " << i << " of " << p << ": not a fresco::Error: " << e.what();
        }
      }
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(IdxReader, CountMismatch) {
  const Bytes px = pixels(kN * kH * kW);
  write_raw(dir_.file("img"), images_file(px));
  write_raw(dir_.file("lab"), labels_file({0, 1, 2, 3}));
  expect_error([&] { fresco::data::load_idx_pair(dir_.file("img"), dir_.file("lab"), 10, "x"); },
               ErrorCode::kBadData,
               {dir_.file("lab"), "label count (dimension 0) is 4, expected 5", dir_.file("img")});
}

TEST_F(IdxReader, LabelOutOfRange) {
  const Bytes px = pixels(kN * kH * kW);
  write_raw(dir_.file("img"), images_file(px));
  write_raw(dir_.file("lab"), labels_file({0, 1, 2, 10, 4}));
  expect_error([&] { fresco::data::load_idx_pair(dir_.file("img"), dir_.file("lab"), 10, "x"); },
               ErrorCode::kBadData, {dir_.file("lab"), "label at index 3", "is 10, expected < 10"});
  // The same labels are fine for 11 classes.
  EXPECT_EQ(fresco::data::load_idx_pair(dir_.file("img"), dir_.file("lab"), 11, "x").labels[3], 10);
  expect_error([&] { fresco::data::load_idx_pair(dir_.file("img"), dir_.file("lab"), 0, "x"); },
               ErrorCode::kUsage, {"num_classes", "got 0"});
}

TEST_F(IdxReader, MnistDirectory) {
  const Bytes px = pixels(kN * kH * kW), other = pixels(kN * kH * kW, 99);
  // train: both .gz and raw present with different pixels (the .gz must win); test: raw only.
  write_gz(dir_.file("train-images-idx3-ubyte.gz"), images_file(px));
  write_raw(dir_.file("train-images-idx3-ubyte"), images_file(other));
  write_gz(dir_.file("train-labels-idx1-ubyte.gz"), labels_file(kLabels));
  write_raw(dir_.file("t10k-images-idx3-ubyte"), images_file(other));
  write_raw(dir_.file("t10k-labels-idx1-ubyte"), labels_file(kLabels));
  const std::string d = dir_.path().string();
  expect_tiny(fresco::data::load_mnist_dir(d, "train", "tiny"), px, "tiny/train");
  expect_tiny(fresco::data::load_mnist_dir(d, "test", "tiny"), other, "tiny/test");
  expect_error([&] { fresco::data::load_mnist_dir(d, "valid", "tiny"); }, ErrorCode::kUsage,
               {"'valid'", "expected 'train' or 'test'"});
  fs::remove(dir_.file("t10k-labels-idx1-ubyte"));
  expect_error(
      [&] { fresco::data::load_mnist_dir(d, "test", "tiny"); }, ErrorCode::kMissingInput,
      {dir_.file("t10k-labels-idx1-ubyte.gz"), dir_.file("t10k-labels-idx1-ubyte") + ", found neither"});
  const std::string missing = dir_.file("no-such-dir");
  expect_error([&] { fresco::data::load_mnist_dir(missing, "train", "x"); }, ErrorCode::kMissingInput,
               {missing, "no such directory"});
}

TEST(FashionMnist, RealFilesLoad) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " absent (package dataset-fashion-mnist)";
  struct Split {
    const char* split;
    int64_t n;
  };
  for (const Split s : {Split{"train", 60000}, Split{"test", 10000}}) {
    SCOPED_TRACE(s.split);
    const Dataset d = fresco::data::load_mnist_dir(dir, s.split, "fashion-mnist");
    EXPECT_EQ(d.name, std::string("fashion-mnist/") + s.split);
    EXPECT_EQ(d.n, s.n);
    EXPECT_EQ(d.h, 28);
    EXPECT_EQ(d.w, 28);
    EXPECT_EQ(d.c, 1);
    EXPECT_EQ(d.num_classes, 10);
    ASSERT_EQ(d.images.size(), static_cast<size_t>(s.n * 28 * 28));
    ASSERT_EQ(d.labels.size(), static_cast<size_t>(s.n));
    std::vector<int64_t> per_class(10, 0);
    for (int32_t l : d.labels) {
      ASSERT_GE(l, 0);
      ASSERT_LT(l, 10);
      ++per_class[static_cast<size_t>(l)];
    }
    for (int64_t c : per_class) EXPECT_EQ(c, s.n / 10);  // Fashion-MNIST is balanced
    EXPECT_EQ(d.labels[0], 9);                           // both splits start with an ankle boot
    EXPECT_EQ(*std::max_element(d.images.begin(), d.images.end()), 255);
  }
}

bool is_permutation_of_iota(const std::vector<uint32_t>& p) {
  std::vector<bool> seen(p.size(), false);
  for (uint32_t v : p) {
    if (v >= p.size() || seen[v]) return false;
    seen[v] = true;
  }
  return true;
}

TEST(ShuffledIndices, IsAPermutation) {
  for (const uint32_t n : {0u, 1u, 2u, 3u, 10u, 1000u, 60000u}) {
    const std::vector<uint32_t> p = fresco::data::shuffled_indices(n, 42, 0);
    ASSERT_EQ(p.size(), n);
    EXPECT_TRUE(is_permutation_of_iota(p)) << "n=" << n;
  }
}

TEST(ShuffledIndices, PureFunctionOfSeedAndEpoch) {
  const auto a = fresco::data::shuffled_indices(60000, 7, 3);
  EXPECT_EQ(a, fresco::data::shuffled_indices(60000, 7, 3));
  EXPECT_NE(a, fresco::data::shuffled_indices(60000, 7, 4));
  EXPECT_NE(a, fresco::data::shuffled_indices(60000, 8, 3));
  EXPECT_NE(a, fresco::data::shuffled_indices(60000, 7ull | (1ull << 32), 3));  // high seed word matters
  std::vector<uint32_t> iota(60000);
  for (uint32_t i = 0; i < 60000; ++i) iota[i] = i;
  EXPECT_NE(a, iota);
  // Same result from several threads at once (no shared state).
  std::vector<std::vector<uint32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&g] { g = fresco::data::shuffled_indices(60000, 7, 3); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, a);
}

// Pinned output: a change here changes every training run's batch order; only change it on purpose.
TEST(ShuffledIndices, GoldenValues) {
  EXPECT_EQ(fresco::data::shuffled_indices(10, 42, 0), (std::vector<uint32_t>{5, 1, 6, 0, 7, 2, 9, 8, 3, 4}));
  EXPECT_EQ(fresco::data::shuffled_indices(10, 42, 1), (std::vector<uint32_t>{3, 4, 0, 6, 1, 8, 9, 5, 7, 2}));
}

// Every value lands in front about equally often (unbiased Fisher-Yates); deterministic, so never flaky.
TEST(ShuffledIndices, RoughlyUniform) {
  std::vector<int> first(4, 0);
  for (uint32_t epoch = 0; epoch < 4800; ++epoch) ++first[fresco::data::shuffled_indices(4, 1, epoch)[0]];
  for (int c : first) {
    EXPECT_GT(c, 1050);
    EXPECT_LT(c, 1350);
  }
}

}  // namespace
