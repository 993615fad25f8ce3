// Shared helpers of the end-to-end tests: the Fashion-MNIST directory (skip when absent) and a subset of it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fresco/core/data/dataset.h"
#include "fresco/core/data/resize.h"
#include "fresco/core/plugin_loader.h"

namespace fresco::e2e {

inline const std::string kFashionDir = "/usr/share/datasets/fashion-mnist";

inline bool have_fashion_mnist() {
  return std::filesystem::exists(kFashionDir + "/train-images-idx3-ubyte.gz");
}

// Skips the calling test (as a statement: `FRESCO_REQUIRE_FASHION_MNIST();`) where the data is not installed.
#define FRESCO_REQUIRE_FASHION_MNIST()       \
  if (::fresco::e2e::have_fashion_mnist()) { \
  } else                                     \
    GTEST_SKIP() << "Fashion-MNIST not installed"

inline data::Dataset first_samples(const data::Dataset& d, int64_t n) {
  data::Dataset s = d;
  s.n = n;
  s.images.resize(static_cast<size_t>(n * d.sample_bytes()));
  s.labels.resize(static_cast<size_t>(n));
  return s;
}

// d with every image resized to h x w as progressive resolution stages them (data/resize.h).
inline data::Dataset resized(const data::Dataset& d, int64_t h, int64_t w) {
  const data::AreaResize r(d.h, d.w, h, w);
  data::Dataset s = d;
  s.h = h;
  s.w = w;
  s.images.resize(static_cast<size_t>(d.n * h * w * d.c));
  for (int64_t i = 0; i < d.n; ++i)
    r.apply(d.images.data() + i * d.sample_bytes(), s.images.data() + i * s.sample_bytes(), d.c);
  return s;
}

inline void load_plugins() {
  PluginRegistry::instance().load_default({FRESCO_LIB_DIR});
}

}  // namespace fresco::e2e
