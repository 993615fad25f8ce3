// Dataset assembly from IDX pairs and MNIST-style directories, and the epoch shuffle. Invariants: a returned
// Dataset has matching image/label counts and every label < num_classes; shuffled_indices(n, seed, epoch) is
// a pure function (unbiased Fisher-Yates on Philox draws, no global state). Tested by
// tests/core/test_idx_reader.cpp.
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "fresco/core/types.h"
#include "fresco/ops.h"
#include "fresco/philox.h"

namespace fresco::data {
namespace {

namespace fs = std::filesystem;

// Uniform integer in [0, range) for Fisher-Yates position i (Lemire's multiply-shift with rejection, so no
// modulo bias). Candidates are the four words of the Philox block for counter (i, epoch); a rejected block
// moves on to the next sub-stream. The retry cap only guards against a hang; reaching it has probability <
// 2^-2048.
uint32_t uniform_below(uint64_t seed, uint32_t epoch, uint32_t i, uint32_t range) {
  const uint32_t threshold = (0u - range) % range;  // 2^32 mod range
  uint64_t m = 0;
  for (uint32_t sub = 0; sub < 512; ++sub) {
    const FrPhilox4 r = fr_draw4(seed, FR_RNG_SHUFFLE, sub, epoch, i);
    for (uint32_t word : r.v) {
      m = uint64_t{word} * range;
      if (static_cast<uint32_t>(m) >= threshold) return static_cast<uint32_t>(m >> 32);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

}  // namespace

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int32_t num_classes,
                      const std::string& name) {
  FRESCO_CHECK(
      num_classes >= 1 && num_classes <= 256, ErrorCode::kUsage,
      name + ": num_classes must be in [1, 256] for IDX byte labels, got " + std::to_string(num_classes));
  IdxArray images = read_idx(images_path, 3);
  IdxArray labels = read_idx(labels_path, 1);
  if (labels.dims[0] != images.dims[0]) {
    throw Error(ErrorCode::kBadData, labels_path + ": label count (dimension 0) is " +
                                         std::to_string(labels.dims[0]) + ", expected " +
                                         std::to_string(images.dims[0]) + " to match the images of " +
                                         images_path);
  }
  Dataset d;
  d.name = name;
  d.n = images.dims[0];
  d.h = images.dims[1];
  d.w = images.dims[2];
  d.c = 1;
  d.num_classes = num_classes;
  d.labels.resize(labels.data.size());
  for (size_t i = 0; i < labels.data.size(); ++i) {
    const int32_t v = labels.data[i];
    if (v >= num_classes) {
      throw Error(ErrorCode::kBadData, labels_path + ": label at index " + std::to_string(i) +
                                           " (IDX byte offset " + std::to_string(8 + i) + ") is " +
                                           std::to_string(v) + ", expected < " + std::to_string(num_classes) +
                                           " (num_classes)");
    }
    d.labels[i] = v;
  }
  d.images = std::move(images.data);
  return d;
}

Dataset load_mnist_dir(const std::string& dir, const std::string& split, const std::string& name_prefix) {
  FRESCO_CHECK(split == "train" || split == "test", ErrorCode::kUsage,
               dir + ": MNIST split '" + split + "': expected 'train' or 'test'");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found) {
    throw Error(ErrorCode::kMissingInput,
                dir + ": no such directory (expected MNIST/Fashion-MNIST IDX files)");
  }
  if (ec) throw Error(ErrorCode::kIo, dir + ": cannot stat: " + ec.message());
  if (st.type() != fs::file_type::directory) {
    throw Error(ErrorCode::kMissingInput, dir + ": not a directory (expected MNIST/Fashion-MNIST IDX files)");
  }
  const std::string stem = split == "train" ? "train" : "t10k";
  // Prefers the .gz name; names both candidates when neither is there.
  auto pick = [&](const std::string& base) {
    const fs::path gz = fs::path(dir) / (base + ".gz");
    const fs::path raw = fs::path(dir) / base;
    std::error_code e;
    if (fs::exists(gz, e)) return gz.string();
    if (fs::exists(raw, e)) return raw.string();
    throw Error(ErrorCode::kMissingInput, dir + ": " + split + " split: expected " + gz.string() + " or " +
                                              raw.string() + ", found neither");
  };
  const std::string images = pick(stem + "-images-idx3-ubyte");
  const std::string labels = pick(stem + "-labels-idx1-ubyte");
  return load_idx_pair(images, labels, 10, name_prefix.empty() ? split : name_prefix + "/" + split);
}

std::vector<uint32_t> shuffled_indices(uint32_t n, uint64_t seed, uint32_t epoch) {
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  for (uint32_t i = n; i-- > 1;) {
    const uint32_t j = uniform_below(seed, epoch, i, i + 1);
    std::swap(idx[i], idx[j]);
  }
  return idx;
}

void keep_first(Dataset& d, int64_t n) {
  if (n <= 0 || n >= d.n) return;
  d.n = n;
  d.images.resize(static_cast<size_t>(n * d.sample_bytes()));
  d.labels.resize(static_cast<size_t>(n));
}

Dataset synthetic_patches(int64_t n, uint32_t seed) {
  FRESCO_CHECK(n > 0 && n <= (int64_t{1} << 24), ErrorCode::kUsage,
               "synthetic_patches: n must be in [1, 16777216], found " + std::to_string(n));
  Dataset d;
  d.name = "synthetic-patches";
  d.n = n, d.h = 8, d.w = 8, d.c = 1, d.num_classes = 4;
  d.images.resize(static_cast<size_t>(n * 64));
  d.labels.resize(static_cast<size_t>(n));
  uint32_t s = 12345u + seed;
  for (int64_t i = 0; i < n; ++i) {
    const int k = static_cast<int>(i % 4);
    d.labels[static_cast<size_t>(i)] = k;
    for (int p = 0; p < 64; ++p) {
      s = s * 1664525u + 1013904223u;
      d.images[static_cast<size_t>(i * 64 + p)] = static_cast<uint8_t>(s >> 26);
    }
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx)
        d.images[static_cast<size_t>(i * 64 + (2 * k + dy) * 8 + 2 * k + dx)] = 255;
  }
  return d;
}

void validate(const Dataset& d, const std::string& what) {
  const std::string where = what + " '" + d.name + "'";
  FRESCO_CHECK(d.n >= 0 && d.n <= int64_t{UINT32_MAX}, ErrorCode::kBadData,
               where + ": n = " + std::to_string(d.n) + " is outside [0, 2^32 - 1]");
  FRESCO_CHECK(d.n == 0 || (d.h >= 1 && d.w >= 1 && d.c >= 1 && d.h <= 65536 && d.w <= 65536 && d.c <= 4096),
               ErrorCode::kBadData,
               where + ": image shape " + std::to_string(d.h) + "x" + std::to_string(d.w) + "x" +
                   std::to_string(d.c) + " is outside [1, 65536] x [1, 65536] x [1, 4096]");
  const int64_t bytes = d.n == 0 ? 0 : checked_product({d.n, d.h, d.w, d.c});
  FRESCO_CHECK(bytes >= 0 && d.images.size() == static_cast<uint64_t>(bytes), ErrorCode::kBadData,
               where + ": " + std::to_string(d.images.size()) + " image bytes for n x h x w x c = " +
                   std::to_string(d.n) + " x " + std::to_string(d.sample_bytes()));
  FRESCO_CHECK(
      d.labels.size() == static_cast<uint64_t>(d.n), ErrorCode::kBadData,
      where + ": " + std::to_string(d.labels.size()) + " labels for " + std::to_string(d.n) + " images");
  FRESCO_CHECK(d.n == 0 || d.num_classes >= 1, ErrorCode::kBadData,
               where + ": num_classes must be at least 1, found " + std::to_string(d.num_classes));
  for (size_t i = 0; i < d.labels.size(); ++i)
    FRESCO_CHECK(d.labels[i] >= 0 && d.labels[i] < d.num_classes, ErrorCode::kBadData,
                 where + ": label " + std::to_string(d.labels[i]) + " of sample " + std::to_string(i) +
                     " is outside [0, " + std::to_string(d.num_classes) + ")");
}

bool is_dataset_kind(const std::string& kind) {
  return kind == "fashion-mnist" || kind == "mnist" || kind == "cifar10" || kind == "cifar100";
}

std::pair<Dataset, Dataset> load_train_test(const std::string& kind, const std::string& path) {
  FRESCO_CHECK(is_dataset_kind(kind), ErrorCode::kBadConfig,
               "unknown dataset kind '" + kind + "' (known: fashion-mnist, mnist, cifar10, cifar100)");
  if (kind == "cifar10" || kind == "cifar100") {
    std::pair<Dataset, Dataset> binary;
    if (load_cifar_binary(path, kind == "cifar100", kind, &binary)) return binary;
    FRESCO_CHECK(kind == "cifar10", ErrorCode::kMissingInput,
                 path + ": no CIFAR-100 binary files (train.bin, test.bin) there");
    try {
      return load_jpeg_folder_train_test(path, kind);
    } catch (const Error& e) {  // say both layouts were looked for
      throw Error(e.code(),
                  std::string(e.what()) +
                      "; nor are the CIFAR-10 binary files there (data_batch_1..5.bin, test_batch.bin)");
    }
  }
  return {load_mnist_dir(path, "train", kind), load_mnist_dir(path, "test", kind)};
}

}  // namespace fresco::data
