// In-memory image datasets (compact uint8 NHWC + int32 labels), the IDX reader (MNIST, Fashion-MNIST; raw or
// gzip) and the epoch shuffle. Invariants: images.size() == n*h*w*c, labels.size() == n, every label is in
// [0, num_classes); a loader never trusts a header before validating it and never allocates more than the
// file really holds. shuffled_indices is a pure function of (seed, epoch). Tested by
// tests/core/test_idx_reader.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fresco::data {

// Images as compact uint8 NHWC storage plus int32 labels.
struct Dataset {
  std::string name;  // e.g. "fashion-mnist/train"
  int64_t n = 0, h = 0, w = 0, c = 0;
  std::vector<uint8_t> images;  // n*h*w*c bytes, NHWC
  std::vector<int32_t> labels;  // n entries in [0, num_classes)
  int32_t num_classes = 0;
  int64_t sample_bytes() const { return h * w * c; }
};

// One IDX file (http://yann.lecun.com/exdb/mnist/ format), gzip-compressed (detected by the 1f 8b magic, read
// with zlib) or raw. Only the unsigned-byte element type (0x08) is accepted. Limits: every dimension in
// [1, 1<<24], at most 1<<32 elements, images (ndim 3) at most 4096x4096. Throws fresco::Error: kMissingInput
// (no such file), kBadData (malformed header, corrupt gzip, truncated data, trailing bytes), kIo (read
// failed).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
IdxArray read_idx(const std::string& path, int expected_ndim /* 1 for labels, 3 for images */);

// Pairs an images file (ndim 3: n,h,w -> c = 1) and a labels file; checks counts match and labels <
// num_classes.
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int32_t num_classes,
                      const std::string& name);

// MNIST / Fashion-MNIST directory with train-images-idx3-ubyte(.gz) etc.; split is "train" or "test"
// (t10k-* files). Accepts both the .gz and the uncompressed file names (prefers .gz if both exist).
// The dataset is named name_prefix + "/" + split.
Dataset load_mnist_dir(const std::string& dir, const std::string& split, const std::string& name_prefix);

// An image-folder dataset of JPEGs and PNGs, `<root>/<split>/<class>/<file>.{jpg,jpeg,png}` (CIFAR-10 as
// shipped in ../shared/datasets): `path` is the root directory or a .tar.gz of the tree (a leading folder
// inside the archive is fine). Decoded to RGB (c = 3): JPEGs with libturbojpeg, PNGs with libpng as PIL's
// convert("RGB") gives them (alpha dropped, gray replicated); labels are the sorted class-folder names'
// indices; samples are ordered by class, then file name. Throws fresco::Error: kMissingInput (no such path),
// kBadData (no images, a file that does not decode, images of different sizes, a corrupt archive), kIo.
Dataset load_jpeg_folder(const std::string& path, const std::string& split, const std::string& name_prefix);
// Both splits ("train", "test") of such a folder, reading an archive once; their class counts must agree.
std::pair<Dataset, Dataset> load_jpeg_folder_train_test(const std::string& path,
                                                        const std::string& name_prefix);

// CIFAR-10 (cifar100 false) or CIFAR-100 in the binary versions: `path` is a folder holding the .bin files
// (or with one subfolder that does, as the archives unpack) or the .tar.gz itself. Images 32x32x3 (HWC),
// CIFAR-100 with its 100 fine labels. False when `path` holds no such files (an image folder, say); throws
// kMissingInput (a missing file of the set), kBadData (a file that is not whole records, a label out of
// range, a corrupt archive), kIo.
bool load_cifar_binary(const std::string& path, bool cifar100, const std::string& name_prefix,
                       std::pair<Dataset, Dataset>* out);

// Throws kBadData naming `what` ("training set") and the dataset unless the invariants above hold (and n <
// 2^32, the shuffle's index type): for datasets built by hand (DeepLearningTask::data(train, test) checks
// both).
void validate(const Dataset& d, const std::string& what);

// The dataset kinds DataSpec names ("fashion-mnist", "mnist": MNIST-style IDX directories; "cifar10": the
// binary version or a JPEG image folder, either as a folder or its .tar.gz; "cifar100": the binary version),
// and their train and test splits from `path`; an unknown kind is a kBadConfig error.
bool is_dataset_kind(const std::string& kind);
std::pair<Dataset, Dataset> load_train_test(const std::string& kind, const std::string& path);

// d cut to its first n samples (n <= 0 or n >= d.n: unchanged), for short runs (`fresco train --samples`,
// `fresco parity --samples`).
void keep_first(Dataset& d, int64_t n);

// A permutation of [0, n) that is a pure function of (seed, epoch): Fisher-Yates driven by Philox draws
// (purpose FR_RNG_SHUFFLE, counter = (index, epoch)), identical on any machine and thread count.
std::vector<uint32_t> shuffled_indices(uint32_t n, uint64_t seed, uint32_t epoch);

// A small learnable data set for examples and install checks: n images of 8x8x1, 4 classes; class k lights a
// 2x2 patch at (2k, 2k) over uniform noise from a fixed linear congruential sequence seeded by `seed`.
Dataset synthetic_patches(int64_t n, uint32_t seed);

}  // namespace fresco::data
