// One pass over a .tar.gz's regular files (tar_gz.h): 512-byte headers (ustar prefixes, GNU long names),
// read with zlib; every size and length checked before it is used.
#include "data/tar_gz.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "fresco/core/error.h"

namespace fresco::data {
namespace {

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

}  // namespace

std::vector<std::string> path_components(const std::string& p) {
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

void read_tar_gz(const std::string& archive, const std::function<TarWant(const std::string& path)>& want,
                 const std::function<void(const std::string& path, std::vector<uint8_t>&& bytes)>& take,
                 uint64_t max_bytes, const std::string& what) {
  {  // zlib reads a file without the gzip header as it is: say so instead of failing on its "tar header"
    std::FILE* f = std::fopen(archive.c_str(), "rb");
    if (!f) throw Error(ErrorCode::kIo, archive + ": cannot open");
    unsigned char magic[2] = {0, 0};
    const size_t n = std::fread(magic, 1, 2, f);
    std::fclose(f);
    if (n != 2 || magic[0] != 0x1f || magic[1] != 0x8b)
      throw Error(ErrorCode::kBadData, archive + ": not a .tar.gz (no gzip header) and not a folder");
  }
  gzFile g = gzopen(archive.c_str(), "rb");
  if (!g) throw Error(ErrorCode::kIo, archive + ": cannot open");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(g, gzclose);
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
    const TarWant w = type == '0' || type == '\0' ? want(name) : TarWant::kSkip;
    if (w == TarWant::kStop) break;
    if (w == TarWant::kSkip) {
      std::vector<char> skip(std::min<uint64_t>(padded, 1u << 20));
      for (uint64_t left = padded; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, skip.size()));
        gz_read(g, skip.data(), n, archive);
        left -= n;
      }
      continue;
    }
    if (size > max_bytes)
      throw Error(ErrorCode::kBadData,
                  archive + ": " + name + ": " + std::to_string(size) + " bytes is too large for " + what);
    std::vector<uint8_t> bytes(static_cast<size_t>(padded));
    gz_read(g, bytes.data(), bytes.size(), archive);
    bytes.resize(static_cast<size_t>(size));
    take(name, std::move(bytes));
  }
}

}  // namespace fresco::data
