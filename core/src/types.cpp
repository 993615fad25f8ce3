// dtype sizes and names, Shape printing.
#include "fresco/core/types.h"

namespace fresco {

uint32_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I8:
    case DType::U8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) noexcept {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
  }
  return "?";
}

std::string Shape::str() const {
  return "[" + std::to_string(n) + "," + std::to_string(h) + "," + std::to_string(w) + "," +
         std::to_string(c) + "]";
}

}  // namespace fresco
