// fresco::Error: the one exception type of the core, with a stable code that the CLI maps to an exit status.
// Messages say what was expected, what was found and where (layer, tensor, region, file offset).
// Tested by tests/core/test_error.cpp.
#pragma once

#include <stdexcept>
#include <string>

namespace fresco {

enum class ErrorCode : int {
  kUsage = 64,         // bad command line or API misuse (wrong phase)
  kBadData = 65,       // malformed input file
  kMissingInput = 66,  // file or directory not found
  kInternal = 70,      // a bug, or a plugin/kernel failure
  kIo = 74,            // read/write failed
  kRetry = 75,         // transient
  kBadConfig = 78,     // invalid model, job or plugin configuration
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  int exit_status() const noexcept { return static_cast<int>(code_); }

 private:
  ErrorCode code_;
};

const char* error_code_name(ErrorCode code) noexcept;

}  // namespace fresco

#define FRESCO_STR2(x) #x
#define FRESCO_STR(x) FRESCO_STR2(x)
// Throws fresco::Error(code, msg) when cond is false. msg may use operator+ on std::string.
#define FRESCO_CHECK(cond, code, msg)                             \
  do {                                                            \
    if (!(cond)) throw ::fresco::Error((code), std::string(msg)); \
  } while (0)
