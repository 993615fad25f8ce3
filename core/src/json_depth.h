// JSON nesting is checked before a job or model text is parsed: nlohmann's parser builds and its serializer
// walks the tree recursively, so a file of a few hundred thousand brackets would overflow the stack. Models
// nest blocks at most 64 deep (blueprint.cpp), about 130 JSON levels.
#pragma once

#include <string>

#include "fresco/core/error.h"

namespace fresco {

inline constexpr int kMaxJsonDepth = 256;

// Throws kBadConfig when arrays and objects in `text` nest deeper than kMaxJsonDepth (brackets inside strings
// do not count).
inline void check_json_depth(const std::string& text, const std::string& source) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      FRESCO_CHECK(++depth <= kMaxJsonDepth, ErrorCode::kBadConfig,
                   source + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
}

}  // namespace fresco
