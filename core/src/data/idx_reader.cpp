// IDX reader (MNIST format), raw or gzip: validates the header before allocating anything, then streams the
// data in bounded chunks (the buffer grows only as bytes really arrive, and reading stops one byte past the
// promised size), so a lying header, a huge file or a gzip bomb cannot exhaust memory or hang. Every failure
// is one fresco::Error line "PATH: what, expected X, found Y". Tested by tests/core/test_idx_reader.cpp.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"

namespace fresco::data {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxElements = int64_t{1} << 32;
constexpr int64_t kMaxImageSide = 4096;
constexpr int kMaxNdim = 4;
constexpr size_t kInChunk = size_t{1} << 16;         // compressed bytes read per fread
constexpr int64_t kFirstReserve = int64_t{1} << 20;  // data buffer starts here and doubles as bytes arrive
constexpr size_t kMaxReadCall = size_t{1} << 30;     // fits zlib's uInt

[[noreturn]] void fail(ErrorCode code, const std::string& path, const std::string& what) {
  throw Error(code, path + ": " + what);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string hex8(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", v & 0xffu);
  return buf;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string file_type_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

// Sequential bytes of one regular file, inflated on the fly when it starts with the gzip magic 1f 8b. Reads
// only as much of the file as the caller asks for (plus one compressed chunk).
class ByteStream {
 public:
  explicit ByteStream(const std::string& path) : path_(path) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (st.type() == fs::file_type::not_found) fail(ErrorCode::kMissingInput, path_, "no such file");
    if (ec) fail(ErrorCode::kIo, path_, "cannot stat: " + ec.message());
    if (st.type() != fs::file_type::regular) {
      fail(ErrorCode::kBadData, path_, "expected a regular IDX file, found " + file_type_name(st.type()));
    }
    const uintmax_t size = fs::file_size(path, ec);
    if (ec) fail(ErrorCode::kIo, path_, "cannot read the file size: " + ec.message());
    file_size_ = static_cast<int64_t>(size);
    errno = 0;
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      const int err = errno;
      fail(err == ENOENT ? ErrorCode::kMissingInput : ErrorCode::kIo, path_,
           std::string("cannot open: ") + std::strerror(err));
    }
    uint8_t magic[2] = {0, 0};
    const size_t got = std::fread(magic, 1, 2, file_);
    if (got < 2 && std::ferror(file_)) io_fail("read failed");
    gzip_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (std::fseek(file_, 0, SEEK_SET) != 0) io_fail("seek failed");
    if (gzip_) {
      in_.resize(kInChunk);
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {  // 16+: gzip wrapper only, checks the CRC and size
        fail(ErrorCode::kInternal, path_, "zlib inflateInit2 failed" + zlib_msg());
      }
      z_init_ = true;
    }
  }
  ~ByteStream() {
    if (z_init_) inflateEnd(&zs_);
    if (file_ != nullptr) std::fclose(file_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  bool gzip() const { return gzip_; }
  int64_t file_size() const { return file_size_; }
  // For messages about missing bytes: says why a gzip file ran out early.
  std::string eof_note() const {
    return cut_ ? " (the gzip stream ends early: unexpected end of file, the .gz file is truncated)" : "";
  }
  bool gzip_cut() const { return cut_; }

  // Reads up to n bytes; returns fewer only at the end of the data.
  size_t read_full(uint8_t* out, size_t n) {
    size_t total = 0;
    while (total < n) {
      const size_t want = std::min(n - total, kMaxReadCall);
      const size_t got = gzip_ ? read_gzip(out + total, want) : read_raw(out + total, want);
      total += got;
      if (got < want) break;
    }
    return total;
  }

 private:
  [[noreturn]] void io_fail(const char* what) {
    const int err = errno;
    fail(ErrorCode::kIo, path_, std::string(what) + ": " + std::strerror(err));
  }

  std::string zlib_msg() const { return zs_.msg != nullptr ? std::string(": ") + zs_.msg : std::string(); }

  size_t read_raw(uint8_t* out, size_t n) {
    errno = 0;
    const size_t got = std::fread(out, 1, n, file_);
    if (got < n && std::ferror(file_)) io_fail("read failed");
    return got;
  }

  bool refill() {
    errno = 0;
    const size_t got = std::fread(in_.data(), 1, in_.size(), file_);
    if (got == 0 && std::ferror(file_)) io_fail("read failed");
    compressed_read_ += static_cast<int64_t>(got);
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  int64_t compressed_offset() const { return compressed_read_ - static_cast<int64_t>(zs_.avail_in); }

  size_t read_gzip(uint8_t* out, size_t n) {
    zs_.next_out = out;
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out > 0 && !ended_) {
      if (zs_.avail_in == 0 && !refill()) {
        ended_ = true;
        cut_ = !member_done_;
        break;
      }
      if (member_done_) {  // more bytes after a complete gzip member: only another member may follow
        if (zs_.next_in[0] != 0x1f) {
          fail(ErrorCode::kBadData, path_,
               "trailing garbage after the gzip stream at compressed offset " +
                   std::to_string(compressed_offset()) +
                   ": expected end of file or another gzip member (1f 8b), found " + hex8(zs_.next_in[0]));
        }
        inflateReset(&zs_);
        member_done_ = false;
      }
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc == Z_OK || (rc == Z_BUF_ERROR && zs_.avail_in == 0)) {
        // progress made, or more input needed: loop
      } else {
        const std::string msg = zs_.msg != nullptr ? zs_.msg : "zlib error " + std::to_string(rc);
        fail(rc == Z_MEM_ERROR ? ErrorCode::kInternal : ErrorCode::kBadData, path_,
             "corrupt gzip stream near compressed offset " + std::to_string(compressed_offset()) +
                 " (zlib: " + msg + ")");
      }
    }
    return n - zs_.avail_out;
  }

  const std::string& path_;
  std::FILE* file_ = nullptr;
  int64_t file_size_ = 0;
  bool gzip_ = false;
  bool z_init_ = false;
  z_stream zs_{};
  std::vector<unsigned char> in_;
  int64_t compressed_read_ = 0;
  bool member_done_ = false;  // the current gzip member reached its trailer (CRC and size checked)
  bool ended_ = false;        // no more compressed input
  bool cut_ = false;          // input ended inside a gzip member
};

std::string describe(int ndim) {
  if (ndim == 3) return "3-d unsigned-byte images";
  if (ndim == 1) return "1-d unsigned-byte labels";
  return std::to_string(ndim) + "-d unsigned-byte data";
}

std::string dim_name(int ndim, int i) {
  if (i == 0) return " (count)";
  if (ndim == 3) return i == 1 ? " (height)" : " (width)";
  return "";
}

// Why an IDX type byte other than 0x08 was refused.
std::string type_hint(uint8_t type) {
  switch (type) {
    case 0x09:
      return "; element type 0x09 (signed byte) is not supported, only 0x08 (unsigned byte)";
    case 0x0B:
      return "; element type 0x0b (int16) is not supported, only 0x08 (unsigned byte)";
    case 0x0C:
      return "; element type 0x0c (int32) is not supported, only 0x08 (unsigned byte)";
    case 0x0D:
      return "; element type 0x0d (float32) is not supported, only 0x08 (unsigned byte)";
    case 0x0E:
      return "; element type 0x0e (float64) is not supported, only 0x08 (unsigned byte)";
    default:
      return "; not an IDX file";
  }
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_ndim) {
  FRESCO_CHECK(expected_ndim >= 1 && expected_ndim <= kMaxNdim, ErrorCode::kUsage,
               path + ": read_idx expected_ndim must be in [1, " + std::to_string(kMaxNdim) + "], got " +
                   std::to_string(expected_ndim));
  ByteStream in(path);
  const uint32_t want_magic = 0x00000800u | static_cast<uint32_t>(expected_ndim);
  const std::string expected_magic =
      "(expected " + hex32(want_magic) + " for " + describe(expected_ndim) + ")";

  // Header: magic, then one big-endian uint32 per dimension.
  uint8_t head[4 + 4 * kMaxNdim] = {};
  size_t got = in.read_full(head, 4);
  if (got < 4) {
    fail(ErrorCode::kBadData, path,
         "truncated header: expected at least 4 bytes (IDX magic), found " + std::to_string(got) +
             in.eof_note());
  }
  const uint32_t magic = be32(head);
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08) {
    const std::string hint = head[0] == 0 && head[1] == 0 ? type_hint(head[2]) : "; not an IDX file";
    fail(ErrorCode::kBadData, path, "bad IDX magic " + hex32(magic) + " " + expected_magic + hint);
  }
  if (head[3] != expected_ndim) {
    fail(ErrorCode::kBadData, path,
         "bad IDX magic " + hex32(magic) + " " + expected_magic + ": ndim (byte 3) is " +
             std::to_string(head[3]) + ", expected " + std::to_string(expected_ndim));
  }
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(expected_ndim);
  got = in.read_full(head + 4, header_bytes - 4);
  if (got < header_bytes - 4) {
    fail(ErrorCode::kBadData, path,
         "truncated header: expected " + std::to_string(header_bytes) + " bytes (magic + " +
             std::to_string(expected_ndim) + " dimensions), found " + std::to_string(4 + got) +
             in.eof_note());
  }

  IdxArray out;
  out.dims.resize(static_cast<size_t>(expected_ndim));
  int64_t total = 1;
  bool too_many = false;
  std::string dims_text;
  for (int i = 0; i < expected_ndim; ++i) {
    const int64_t d = be32(head + 4 + 4 * i);
    const std::string where = "dimension " + std::to_string(i) + dim_name(expected_ndim, i) + " is " +
                              std::to_string(d) + " (header byte offset " + std::to_string(4 + 4 * i) + ")";
    if (d == 0) fail(ErrorCode::kBadData, path, where + ", expected >= 1");
    if (d > kMaxDim) fail(ErrorCode::kBadData, path, where + ", expected <= " + std::to_string(kMaxDim));
    if (expected_ndim == 3 && i >= 1 && d > kMaxImageSide) {
      fail(ErrorCode::kBadData, path,
           where + ", expected <= " + std::to_string(kMaxImageSide) + " (images at most 4096x4096)");
    }
    out.dims[static_cast<size_t>(i)] = d;
    dims_text += (i == 0 ? "" : " x ") + std::to_string(d);
    if (!too_many && total > kMaxElements / d) too_many = true;
    if (!too_many) total *= d;
  }
  if (too_many) {
    fail(ErrorCode::kBadData, path,
         "dimensions " + dims_text + " hold more than " + std::to_string(kMaxElements) +
             " elements, expected <= " + std::to_string(kMaxElements));
  }

  const std::string promise = "header promises " + std::to_string(total) + " bytes of data, found ";
  if (!in.gzip()) {
    // The file size is known: check it before allocating anything.
    const int64_t found = in.file_size() - static_cast<int64_t>(header_bytes);
    if (found < total) fail(ErrorCode::kBadData, path, "truncated: " + promise + std::to_string(found));
    if (found > total) {
      fail(ErrorCode::kBadData, path,
           "trailing garbage: " + promise + std::to_string(found) + " (" + std::to_string(found - total) +
               " extra)");
    }
  }
  // Grow the buffer only as bytes really arrive: a lying header costs at most twice the data present.
  int64_t have = 0;
  while (have < total) {
    const int64_t cap = in.gzip() ? std::min(total, std::max(kFirstReserve, 2 * have)) : total;
    out.data.reserve(static_cast<size_t>(cap));
    out.data.resize(static_cast<size_t>(cap));
    const size_t want = static_cast<size_t>(cap - have);
    got = in.read_full(out.data.data() + have, want);
    have += static_cast<int64_t>(got);
    if (got < want) {
      fail(ErrorCode::kBadData, path, "truncated: " + promise + std::to_string(have) + in.eof_note());
    }
  }
  // Exactly one more byte must not exist; for gzip this also drives zlib through the CRC and size trailer.
  uint8_t extra = 0;
  if (in.read_full(&extra, 1) != 0) {
    fail(ErrorCode::kBadData, path,
         "trailing garbage: " + promise + "more (at least " + std::to_string(total + 1) + " bytes)");
  }
  if (in.gzip_cut()) {
    fail(ErrorCode::kBadData, path,
         "truncated gzip stream: all " + std::to_string(total) +
             " bytes of data are present but the stream ends early (unexpected end of file, gzip trailer "
             "missing)");
  }
  return out;
}

}  // namespace fresco::data
