// Names of error codes, for logs and the CLI.
#include "fresco/core/error.h"

namespace fresco {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kUsage:
      return "usage";
    case ErrorCode::kBadData:
      return "bad data";
    case ErrorCode::kMissingInput:
      return "missing input";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kIo:
      return "i/o";
    case ErrorCode::kRetry:
      return "retry";
    case ErrorCode::kBadConfig:
      return "bad configuration";
  }
  return "unknown";
}

}  // namespace fresco
