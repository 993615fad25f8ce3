// Shared helpers of the end-to-end tests: the Fashion-MNIST directory (skip when absent) and a subset of it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fresco/core/data/dataset.h"
#include "fresco/core/plugin_loader.h"

namespace fresco::e2e {

inline const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";

inline bool have_fashion_mnist() {
  return std::filesystem::exists(kFashionDir + "/train-images-idx3-ubyte.gz");
}

inline data::Dataset first_samples(const data::Dataset& d, int64_t n) {
  data::Dataset s = d;
  s.n = n;
  s.images.resize(static_cast<size_t>(n * d.sample_bytes()));
  s.labels.resize(static_cast<size_t>(n));
  return s;
}

inline void load_plugins() {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
}

}  // namespace fresco::e2e
