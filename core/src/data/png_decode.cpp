// PNG decoding with libpng's sequential read API (png_decode.h). libpng reports errors by longjmp, so the
// reading function holds no object with a destructor (rows go straight into the caller's buffer, one
// png_read_row each), and no ancillary chunk but tRNS is kept: a file of compressed text chunks cannot make
// it allocate more than the image itself (PIL's convert("RGB") reads none of them either).
#include "data/png_decode.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace fresco::data {
namespace {

struct Source {
  const uint8_t* p;
  size_t n, at;
};

struct Failure {
  char message[256];
  char warning[256];  // the last warning: libpng names the reason for some errors only there
};

void read_bytes(png_structp png, png_bytep out, png_size_t len) {
  auto* s = static_cast<Source*>(png_get_io_ptr(png));
  if (len > s->n - s->at) png_error(png, "truncated PNG");
  std::memcpy(out, s->p + s->at, len);
  s->at += len;
}

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* f = static_cast<Failure*>(png_get_error_ptr(png));
  std::snprintf(f->message, sizeof f->message, "%s", message ? message : "corrupt PNG");
  png_longjmp(png, 1);
}

// Ancillary-chunk trouble (the pixels still decode), or the reason of an error to come (a size over the
// limit is warned about, then refused as invalid IHDR data): kept for the error message.
void on_warning(png_structp png, png_const_charp message) {
  auto* f = static_cast<Failure*>(png_get_error_ptr(png));
  std::snprintf(f->warning, sizeof f->warning, "%s", message ? message : "");
}

// The header (rgb null) or the whole image into rgb; an error message, empty on success.
std::string read_png(const uint8_t* bytes, size_t n, int max_side, int* w, int* h, uint8_t* rgb) {
  if (!is_png(bytes, n)) return "not a PNG";
  Failure failure{};
  Source source{bytes, n, 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &failure, on_error, on_warning);
  if (!png) return "libpng: cannot create a reader";
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return "libpng: cannot create a reader";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return std::string("corrupt PNG (") + failure.message + (failure.warning[0] ? "; " : "") +
           failure.warning + ")";
  }
  png_set_read_fn(png, &source, read_bytes);
  png_set_user_limits(png, static_cast<png_uint_32>(max_side), static_cast<png_uint_32>(max_side));
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);  // text, profiles, ...: skipped
  png_set_chunk_malloc_max(png, png_alloc_size_t{1} << 20);
  png_read_info(png, info);
  const int pw = static_cast<int>(png_get_image_width(png, info)),
            ph = static_cast<int>(png_get_image_height(png, info));
  if (!rgb) {
    *w = pw, *h = ph;
  } else if (pw != *w || ph != *h) {
    png_destroy_read_struct(&png, &info, nullptr);
    return "the PNG's size changed between its reads";
  } else {
    png_set_expand(png);       // palette -> RGB, gray below 8 bits -> 8, tRNS -> alpha
    png_set_strip_16(png);     // 16-bit samples: the high byte
    png_set_strip_alpha(png);  // alpha dropped, as PIL's convert("RGB")
    png_set_gray_to_rgb(png);
    const int passes = png_set_interlace_handling(png);  // 7 for Adam7: each pass refines the rows in place
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != static_cast<size_t>(pw) * 3)
      png_error(png, "not 8-bit RGB after expansion");
    for (int pass = 0; pass < passes; ++pass)
      for (int y = 0; y < ph; ++y) png_read_row(png, rgb + static_cast<size_t>(y) * pw * 3, nullptr);
    png_read_end(png, nullptr);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return "";
}
}  // namespace

bool is_png(const uint8_t* bytes, size_t n) {
  return n >= 8 && png_sig_cmp(bytes, 0, 8) == 0;
}

std::string png_size(const uint8_t* bytes, size_t n, int max_side, int* w, int* h) {
  return read_png(bytes, n, max_side, w, h, nullptr);
}

std::string png_decode_rgb(const uint8_t* bytes, size_t n, int w, int h, uint8_t* rgb) {
  return read_png(bytes, n, w > h ? w : h, &w, &h, rgb);
}

}  // namespace fresco::data
