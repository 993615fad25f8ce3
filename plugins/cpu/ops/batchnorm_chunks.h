// Batchnorm's [rows, C] view of an NHWC map and its fixed row chunking, shared by the CPU forward and
// backward so both reduce over the same chunks (double partials per chunk, combined in chunk order: results
// do not depend on the thread count). Tests: test_batchnorm.cpp.
#pragma once

#include <algorithm>
#include <string>

#include "cpu_common.h"

namespace fresco::cpu {

// Rows per reduction chunk: about 16K elements of work, at most 256 chunks; a function of the shape only.
inline int64_t bn_grain_rows(int64_t rows, int64_t c) {
  return std::max<int64_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1)), (rows + 255) / 256);
}

struct BnShape {
  int64_t rows, c, chunks, grain;
};

inline BnShape bn_shape(const FrTensor& x, const char* op) {
  const sdk::ChannelRows v = sdk::channel_rows(x, op);
  BnShape s{};
  s.c = v.c;
  s.rows = v.rows;
  s.grain = bn_grain_rows(s.rows, s.c);
  s.chunks = (s.rows + s.grain - 1) / s.grain;
  return s;
}

}  // namespace fresco::cpu
