// The checkpoint file's bytes (checkpoint_file.h).
#include "checkpoint/checkpoint_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fresco/core/error.h"

namespace fresco::checkpoint {

namespace {
constexpr char kMagic[8] = {'F', 'R', 'E', 'S', 'C', 'O', 'C', 'K'};

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

// Reads fixed-size values and byte runs from the file's bytes, each length checked against what is left.
struct Cursor {
  const std::string& data;
  const std::string& path;
  uint64_t at = 0;

  void need(uint64_t n, const char* what) const {
    FRESCO_CHECK(n <= data.size() - at, ErrorCode::kBadData,
                 path + ": truncated checkpoint (" + what + " needs " + std::to_string(n) +
                     " bytes at offset " + std::to_string(at) + ", " + std::to_string(data.size() - at) +
                     " left)");
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string bytes(uint64_t n, const char* what) {
    need(n, what);
    std::string s = data.substr(at, n);
    at += n;
    return s;
  }
};
}  // namespace

uint64_t fnv1a64(const void* data, uint64_t n) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void write_file(const std::string& path, const Contents& c) {
  std::string out(kMagic, sizeof kMagic);
  put<uint32_t>(out, kFormatVersion);
  put<uint32_t>(out, static_cast<uint32_t>(c.records.size()));
  put<uint64_t>(out, c.header.size());
  out += c.header;
  put<uint64_t>(out, fnv1a64(c.header.data(), c.header.size()));
  for (const Record& r : c.records) {
    put<uint32_t>(out, static_cast<uint32_t>(r.name.size()));
    out += r.name;
    put<uint64_t>(out, r.bytes.size());
    put<uint64_t>(out, fnv1a64(r.bytes.data(), r.bytes.size()));
    out.append(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
  }
  // Written whole to PATH.tmp and flushed to the disk (fsync) before the rename, so PATH is always either
  // the previous checkpoint or this one; a failure removes PATH.tmp.
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  FRESCO_CHECK(f, ErrorCode::kIo, tmp + ": cannot open for writing (" + std::strerror(errno) + ")");
  const bool written = std::fwrite(out.data(), 1, out.size(), f) == out.size() && std::fflush(f) == 0 &&
                       ::fsync(::fileno(f)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (!written || !closed) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::kIo, tmp + ": write failed (" + std::to_string(out.size()) +
                                    " bytes: " + std::strerror(written ? errno : err) + ")");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::kIo, path + ": cannot replace it with " + tmp + " (" + why + ")");
  }
}

Contents read_file(const std::string& path) {
  std::error_code ec;
  FRESCO_CHECK(std::filesystem::is_regular_file(path, ec), ErrorCode::kMissingInput,
               path + ": no such checkpoint file");
  std::string data;
  {
    std::ifstream f(path, std::ios::binary);
    FRESCO_CHECK(f.good(), ErrorCode::kIo, path + ": cannot open");
    data.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    FRESCO_CHECK(!f.bad(), ErrorCode::kIo, path + ": read failed");
  }
  FRESCO_CHECK(data.size() >= sizeof kMagic && std::memcmp(data.data(), kMagic, sizeof kMagic) == 0,
               ErrorCode::kBadData, path + ": not a fresco checkpoint (no FRESCOCK header)");
  Cursor c{data, path, sizeof kMagic};
  const auto version = c.get<uint32_t>("the format version");
  FRESCO_CHECK(version == kFormatVersion, ErrorCode::kBadData,
               path + ": checkpoint format " + std::to_string(version) + ", this fresco reads format " +
                   std::to_string(kFormatVersion));
  const auto count = c.get<uint32_t>("the record count");
  Contents out;
  out.header = c.bytes(c.get<uint64_t>("the header length"), "the header");
  FRESCO_CHECK(c.get<uint64_t>("the header checksum") == fnv1a64(out.header.data(), out.header.size()),
               ErrorCode::kBadData, path + ": the header's checksum does not match (a damaged file)");
  for (uint32_t i = 0; i < count; ++i) {
    Record r;
    r.name = c.bytes(c.get<uint32_t>("a record name length"), "a record name");
    const auto n = c.get<uint64_t>("a record length");
    const auto sum = c.get<uint64_t>("a record checksum");
    c.need(n, "a record");
    r.bytes.assign(data.begin() + static_cast<std::ptrdiff_t>(c.at),
                   data.begin() + static_cast<std::ptrdiff_t>(c.at + n));
    c.at += n;
    FRESCO_CHECK(sum == fnv1a64(r.bytes.data(), r.bytes.size()), ErrorCode::kBadData,
                 path + ": record " + r.name + ": the checksum does not match (a damaged file)");
    out.records.push_back(std::move(r));
  }
  FRESCO_CHECK(c.at == data.size(), ErrorCode::kBadData,
               path + ": " + std::to_string(data.size() - c.at) + " bytes after the last record");
  return out;
}

}  // namespace fresco::checkpoint
