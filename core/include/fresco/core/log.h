// Logging through spdlog; the level comes from FRESCO_LOG (trace, debug, info, warn, error, off) or
// set_log_level.
#pragma once

#include <string>

namespace spdlog {
class logger;
}

namespace fresco {

spdlog::logger& log();
// Accepts the spdlog level names; throws fresco::Error(kUsage) on anything else.
void set_log_level(const std::string& level);

}  // namespace fresco
