// The fresco logger: stderr, one line per event, level from FRESCO_LOG.
#include "fresco/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "fresco/core/error.h"

namespace fresco {

namespace {
spdlog::level::level_enum parse_level(const std::string& s) {
  const auto l = spdlog::level::from_str(s);
  if (l == spdlog::level::off && s != "off")
    throw Error(ErrorCode::kUsage,
                "unknown log level '" + s + "' (expected trace, debug, info, warn, error, off)");
  return l;
}
}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("fresco");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    const char* env = std::getenv("FRESCO_LOG");
    l->set_level(spdlog::level::info);
    if (env && *env) {
      const auto lv = spdlog::level::from_str(env);
      if (lv != spdlog::level::off || std::string(env) == "off")
        l->set_level(lv);
      else
        l->warn("FRESCO_LOG='{}' is not a log level (trace, debug, info, warn, error, off); using info", env);
    }
    return l;
  }();
  return *logger;
}

void set_log_level(const std::string& level) {
  log().set_level(parse_level(level));
}

}  // namespace fresco
