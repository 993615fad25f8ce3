// `fresco plugins`: the search path, every plugin loaded (name, version, ABI, device, kernels) and every
// candidate refused with its reason.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "fresco/core/error.h"
#include "fresco/core/plugin_loader.h"

namespace fresco::cli {

std::vector<std::string> named_plugin_paths(const std::vector<std::string>& paths_in) {
  // A path the user names on the command line is taken from the working directory (the search itself never
  // looks there) and must exist (the default folders may not).
  std::vector<std::string> out;
  for (const auto& want : paths_in) {
    std::error_code ec;
    FRESCO_CHECK(std::filesystem::exists(want, ec), ErrorCode::kMissingInput,
                 want + ": no such plugin file or directory");
    out.push_back(std::filesystem::absolute(want, ec).string());
  }
  return out;
}

void check_named_plugins_loaded(const std::vector<std::string>& paths) {
  // A plugin the user named explicitly must load: its refusal is an error (exit 78, one line).
  const auto refused = PluginRegistry::instance().refused();
  for (const auto& want : paths) {
    std::error_code ec;
    const std::string canon = std::filesystem::weakly_canonical(want, ec).string();
    for (const auto& r : refused)
      if (r.path == canon || r.path == want)
        throw Error(ErrorCode::kBadConfig, "plugin " + r.path + " refused: " + r.reason);
  }
}

void load_named_plugins(const std::vector<std::string>& paths_in) {
  const std::vector<std::string> paths = named_plugin_paths(paths_in);
  PluginRegistry::instance().load_default(paths);
  check_named_plugins_loaded(paths);
}

int cmd_plugins(const std::vector<std::string>& paths_in) {
  const std::vector<std::string> extra_paths = named_plugin_paths(paths_in);
  auto& reg = PluginRegistry::instance();
  std::printf("search path:\n");
  for (const auto& [dir, why] : reg.search_dirs(extra_paths))
    std::printf("  %s  (%s)\n", dir.c_str(), why.c_str());
  reg.load_default(extra_paths);
  const auto loaded = reg.loaded();
  std::printf("loaded (%zu):\n", loaded.size());
  for (const auto& p : loaded) {
    // A device plugin says how many of its devices this machine has (a CUDA plugin on a machine without a
    // GPU loads, and finds none).
    std::string present;
    if (const FrDeviceApi* api = p.device.empty() ? nullptr : reg.device(p.device); api && api->device_count)
      present = " (" + std::to_string(api->device_count()) + " present)";
    if (const FrCommApi* comm = p.device.empty() ? nullptr : reg.comm(p.device))  // its collective backend
      present += std::string(", collectives: ") + comm->name;
    std::printf("  %-8s %-8s ABI %u.%u  device %-5s %3zu kernels  %s%s\n", p.name.c_str(), p.version.c_str(),
                p.abi_major, p.abi_minor, p.device.empty() ? "-" : p.device.c_str(), p.n_kernels,
                p.path.c_str(), present.c_str());
  }
  const auto refused = reg.refused();
  std::printf("refused (%zu):\n", refused.size());
  for (const auto& r : refused) std::printf("  %s: %s\n", r.path.c_str(), r.reason.c_str());
  std::fflush(stdout);
  check_named_plugins_loaded(extra_paths);
  return 0;
}

}  // namespace fresco::cli
