// PNG decoding for the image-folder datasets (jpeg_folder.cpp), with libpng, to 8-bit RGB as torchvision's
// ImageFolder loader gets it (PIL's Image.open(f).convert("RGB")): palette and low-bit-depth gray expanded,
// gray replicated to three channels, alpha (and a tRNS colour) dropped rather than composited, gamma and
// colour-profile chunks ignored, interlaced images deinterlaced. 16-bit samples keep their high byte (as PIL
// reads 16-bit colour; PIL clips 16-bit gray instead, which this does not copy). Tested by
// tests/core/test_jpeg_folder.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fresco::data {

// Whether bytes [0, n) start with the PNG signature.
bool is_png(const uint8_t* bytes, size_t n);

// The width and height of the PNG in bytes [0, n), each at most max_side (larger is refused before any
// pixel is read); returns an error message, empty on success.
std::string png_size(const uint8_t* bytes, size_t n, int max_side, int* w, int* h);

// Decodes the PNG into rgb (w * h * 3 bytes, w and h as png_size gave them); an error message, empty on
// success.
std::string png_decode_rgb(const uint8_t* bytes, size_t n, int w, int h, uint8_t* rgb);

}  // namespace fresco::data
