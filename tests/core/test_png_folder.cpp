// PNG images in image-folder datasets (data::load_jpeg_folder, core/src/data/png_decode.h): every PNG colour
// type decodes to the RGB that PIL's convert("RGB") gives (torchvision's ImageFolder loader): 8-bit RGB as
// written, gray replicated, alpha and tRNS dropped, palettes looked up, 16-bit samples' high byte, Adam7
// interlacing undone; PNGs and JPEGs mix in one folder, also from a .tar.gz, told apart by content; text
// chunks are not inflated; a file that is not a PNG, a truncated one and one larger than the size limit are
// one kBadData error each, naming the file.
#include <gtest/gtest.h>
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fresco/core/data/dataset.h"
#include "fresco/core/error.h"
#include "image_folder_files.h"
#include "temp_dir.h"

using namespace fresco;
namespace fs = std::filesystem;

namespace {
using test::File;
using test::TempDir;

// A PNG of w x h pixels of `color` type and `depth` bits, its rows packed in `raw` (as libpng takes them),
// with `palette` / `trns` where given, Adam7-interlaced with `interlace`.
std::vector<uint8_t> make_png(int w, int h, int color, int depth, const std::vector<uint8_t>& raw,
                              bool interlace = false, const std::vector<png_color>& palette = {},
                              const std::vector<uint8_t>& trns = {}, int text_chunks = 0) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  const size_t row = raw.size() / static_cast<size_t>(h);
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int y = 0; y < h; ++y) rows[static_cast<size_t>(y)] = const_cast<png_bytep>(raw.data()) + y * row;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng could not write the test image";
    return {};
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, png_size_t n) {
        auto* o = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        o->insert(o->end(), data, data + n);
      },
      nullptr);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), depth, color,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
  std::string zeros(size_t{4} << 20, '0');  // 4 MiB of text each, a few KB compressed (zTXt)
  std::vector<png_text> text(static_cast<size_t>(text_chunks));
  for (png_text& t : text) {
    t.compression = PNG_TEXT_COMPRESSION_zTXt;
    t.key = const_cast<char*>("Comment");
    t.text = zeros.data();
    t.text_length = zeros.size();
  }
  if (text_chunks > 0) png_set_text(png, info, text.data(), text_chunks);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The one image of a folder train/a/<name> holding `bytes`.
data::Dataset load_one(const std::string& name, const std::vector<uint8_t>& bytes) {
  const TempDir dir;
  test::write_tree(dir.path(), {{"train/a/" + name, bytes}});
  return data::load_jpeg_folder(dir.path().string(), "train", "t");
}
}  // namespace

TEST(PngFolder, EveryColourTypeDecodesAsPilsRgb) {
  const int w = 7, h = 5;
  const size_t n = static_cast<size_t>(w * h);
  const std::vector<uint8_t> rgb = random_bytes(n * 3, 1);
  EXPECT_EQ(load_one("rgb.png", make_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb)).images, rgb);
  EXPECT_EQ(load_one("adam7.png", make_png(w, h, PNG_COLOR_TYPE_RGB, 8, rgb, true)).images, rgb);
  std::vector<uint8_t> rgba(n * 4), ga(n * 2), rgb16(n * 6), gray3(n * 3);
  const std::vector<uint8_t> gray = random_bytes(n, 2), alpha = random_bytes(n, 3),
                             low = random_bytes(n * 3, 4);
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < 3; ++c) {
      rgba[4 * i + c] = rgb[3 * i + c];
      rgb16[6 * i + 2 * c] = rgb[3 * i + c];  // big-endian: the high byte first
      rgb16[6 * i + 2 * c + 1] = low[3 * i + c];
      gray3[3 * i + c] = gray[i];
    }
    rgba[4 * i + 3] = alpha[i];
    ga[2 * i] = gray[i], ga[2 * i + 1] = alpha[i];
  }
  EXPECT_EQ(load_one("rgba.png", make_png(w, h, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba)).images,
            rgb);  // alpha dropped
  EXPECT_EQ(load_one("rgb16.png", make_png(w, h, PNG_COLOR_TYPE_RGB, 16, rgb16)).images, rgb);  // high bytes
  EXPECT_EQ(load_one("gray.png", make_png(w, h, PNG_COLOR_TYPE_GRAY, 8, gray)).images, gray3);
  EXPECT_EQ(load_one("ga.png", make_png(w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga)).images, gray3);
  // a 4-bit palette with transparency: each pixel its colour, the alpha dropped
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 0}, {0, 255, 128}};
  const std::vector<uint8_t> index = {0, 1, 2, 1, 0, 2, 2};  // one row of 7, packed two a byte
  std::vector<uint8_t> packed;
  for (int y = 0; y < h; ++y)
    for (size_t x = 0; x < index.size(); x += 2)
      packed.push_back(static_cast<uint8_t>(index[x] << 4 | (x + 1 < index.size() ? index[x + 1] : 0)));
  std::vector<uint8_t> want;
  for (int y = 0; y < h; ++y)
    for (uint8_t i : index) want.insert(want.end(), {palette[i].red, palette[i].green, palette[i].blue});
  EXPECT_EQ(
      load_one("pal.png", make_png(w, h, PNG_COLOR_TYPE_PALETTE, 4, packed, false, palette, {0, 128})).images,
      want);
}

// A PNG is told by its content, not its name; its compressed text chunks are skipped unread (each of 4 MiB
// would otherwise be inflated before the pixels: a decompression bomb, 20 of them here).
TEST(PngFolder, ContentNotNameAndNoTextInflated) {
  const std::vector<uint8_t> rgb = random_bytes(5 * 4 * 3, 8);
  EXPECT_EQ(load_one("misnamed.jpg", make_png(5, 4, PNG_COLOR_TYPE_RGB, 8, rgb)).images, rgb);
  const std::vector<uint8_t> bomb = make_png(5, 4, PNG_COLOR_TYPE_RGB, 8, rgb, false, {}, {}, 20);
  EXPECT_LT(bomb.size(), size_t{4} << 20);
  EXPECT_EQ(load_one("text.png", bomb).images, rgb);
}

TEST(PngFolder, PngsAndJpegsMixAlsoFromAnArchive) {
  const std::vector<uint8_t> rgb = random_bytes(4 * 3 * 3, 5);
  const std::vector<File> files = {{"train/cat/a.png", make_png(4, 3, PNG_COLOR_TYPE_RGB, 8, rgb)},
                                   {"train/cat/b.jpg", test::make_jpeg(4, 3, 6)},
                                   {"train/dog/c.PNG", make_png(4, 3, PNG_COLOR_TYPE_RGB, 8, rgb, true)}};
  const TempDir dir, arc;
  test::write_tree(dir.path(), files);
  test::write_tar_gz(arc.path() / "s.tar.gz", "s", files);
  const data::Dataset a = data::load_jpeg_folder(dir.path().string(), "train", "t");
  const data::Dataset b = data::load_jpeg_folder((arc.path() / "s.tar.gz").string(), "train", "t");
  EXPECT_EQ(a.n, 3);
  EXPECT_EQ(a.labels, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(a.images, b.images);
  EXPECT_TRUE(std::equal(rgb.begin(), rgb.end(), a.images.begin()));       // cat/a.png
  EXPECT_TRUE(std::equal(rgb.begin(), rgb.end(), a.images.begin() + 72));  // dog/c.PNG
}

TEST(PngFolder, BadPngsAreOneClearErrorEach) {
  auto error = [](const std::string& name, const std::vector<uint8_t>& bytes) {
    try {
      load_one(name, bytes);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadData) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string what = error("x.png", {'n', 'o', 'p', 'e'});
  EXPECT_NE(what.find("train/a/x.png: not a PNG"), std::string::npos) << what;
  std::vector<uint8_t> cut = make_png(6, 6, PNG_COLOR_TYPE_RGB, 8, random_bytes(108, 7));
  cut.resize(cut.size() - 20);  // the image data and the end chunk cut short
  what = error("cut.png", cut);
  EXPECT_NE(what.find("train/a/cut.png: corrupt PNG"), std::string::npos) << what;
  what = error("wide.png", make_png(5000, 1, PNG_COLOR_TYPE_GRAY, 8, std::vector<uint8_t>(5000)));
  EXPECT_NE(what.find("train/a/wide.png: corrupt PNG"), std::string::npos) << what;
  EXPECT_NE(what.find("limit"), std::string::npos) << what;
}
