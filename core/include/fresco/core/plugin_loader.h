// PluginRegistry: finds, checks and loads backend and op-library plugins (Boost.DLL), never unloads them.
// Search order: explicit paths, FRESCO_PLUGIN_PATH, the install directory, the directory of libfresco; never
// the current directory. Every refused candidate is kept with its path and reason. Op names map to dense ids.
// Tested by tests/core/test_plugin_loader.cpp (with deliberately broken plugins from
// tests/plugins/testplugins).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fresco/plugin.h"

namespace fresco {

struct PluginInfo {
  std::string path, name, version, device;
  uint16_t abi_major = 0, abi_minor = 0;
  size_t n_kernels = 0;
  size_t n_schemas = 0;
};

// What probe_file found: the checks of loading without registering anything (for fresco-plugin-check).
struct PluginProbe {
  bool ok = false;
  std::string path, reason;  // reason: why it is not an acceptable plugin (empty when ok)
  FrAbiInfo abi{};
  FrPlugin table{};  // valid while the process runs (the library stays loaded)
};

struct RefusedPlugin {
  std::string path, reason;
};

class PluginRegistry {
 public:
  // The process-wide registry (plugins stay loaded for the life of the process).
  static PluginRegistry& instance();

  // Loads every libfresco-*.so found in the search order (each file once). Returns the number newly loaded.
  int load_default(const std::vector<std::string>& explicit_paths = {});
  // Loads one file; false (and an entry in refused()) when it is not an acceptable plugin.
  bool load_file(const std::string& path);
  // Opens and checks a plugin (symbols, ABI, init, struct sizes, kernel entries) without registering its
  // device or kernels, so it may duplicate what is loaded. The library stays loaded.
  PluginProbe probe_file(const std::string& path);
  // Directories searched, in order, with why each is there ("explicit", "FRESCO_PLUGIN_PATH", ...).
  std::vector<std::pair<std::string, std::string>> search_dirs(
      const std::vector<std::string>& explicit_paths) const;

  std::vector<PluginInfo> loaded() const;
  std::vector<RefusedPlugin> refused() const;
  std::vector<std::string> devices() const;

  const FrDeviceApi* device(const std::string& name) const;
  // The collective backend (ABI 1.1) whose collectives run on `device`, or nullptr.
  const FrCommApi* comm(const std::string& device) const;
  int32_t op_id(const std::string& op) const;  // -1 when no plugin provides the op
  // The kernel of op on device accepting dtype (an FrDType), or nullptr.
  const FrKernelDef* kernel(int32_t op_id, const std::string& device, uint32_t dtype) const;
  // The path of the plugin whose kernel kernel(op_id, device, dtype) returns; empty when none.
  std::string kernel_owner(int32_t op_id, const std::string& device, uint32_t dtype) const;
  const FrHostApi* host_api() const;
  // The schema of a custom op some loaded op library declares, or nullptr.
  const FrOpSchema* schema(const std::string& op) const;
  std::vector<std::string> schema_names() const;

 private:
  PluginRegistry() = default;
  bool refuse(const std::string& path, const std::string& reason);
  struct KernelEntry {
    const FrKernelDef* def;
    std::string device;
    std::string plugin_path;
  };
  mutable std::mutex mu_;
  std::vector<PluginInfo> loaded_;
  std::vector<RefusedPlugin> refused_;
  std::vector<std::string> seen_paths_;
  std::map<std::string, const FrDeviceApi*> devices_;
  std::map<std::string, std::pair<const FrCommApi*, std::string>> comms_;  // device -> (api, plugin path)
  std::map<std::string, int32_t> op_ids_;
  std::vector<std::vector<KernelEntry>> kernels_;  // [op id] -> kernels for devices
  std::map<std::string, std::pair<const FrOpSchema*, std::string>> schemas_;  // op -> (schema, plugin path)
};

// Converts an FrError from a plugin into a fresco::Error (and frees it). No-op for nullptr.
void throw_if_error(FrError* err, const std::string& context);

}  // namespace fresco
