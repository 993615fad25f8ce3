// The checkpoint file (DeepLearningTask::save_checkpoint / load_checkpoint): data only, versioned,
// checksummed per record, written to PATH.tmp and renamed over PATH so a crash never leaves a torn file.
// Layout (little-endian): "FRESCOCK", u32 format version, u32 record count, u64 header length, the header
// (JSON text: what job wrote it), u64 FNV-1a-64 of the header; then per record u32 name length, the name,
// u64 byte count, u64 FNV-1a-64 of the bytes, the bytes. Reading checks every length against the file before
// allocating and every checksum. Tests: tests/core/test_checkpoint_file.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fresco::checkpoint {

inline constexpr uint32_t kFormatVersion = 1;

struct Record {
  std::string name;
  std::vector<uint8_t> bytes;
};

struct Contents {
  std::string header;  // JSON text
  std::vector<Record> records;
};

// FNV-1a, 64-bit, over `n` bytes.
uint64_t fnv1a64(const void* data, uint64_t n) noexcept;

// Writes `c` to path (through path + ".tmp", then a rename). kIo naming the path on any failure.
void write_file(const std::string& path, const Contents& c);
// Reads and checks a file write_file wrote: kMissingInput when it does not exist, kBadData naming the path
// and what is wrong (not a checkpoint, a newer format, truncated, a checksum that does not match).
Contents read_file(const std::string& path);

}  // namespace fresco::checkpoint
