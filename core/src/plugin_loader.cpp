// PluginRegistry: Boost.DLL loading, ABI checks, kernel-table registration with duplicate detection.
#include "fresco/core/plugin_loader.h"

#include <spdlog/spdlog.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "fresco/core/error.h"
#include "fresco/core/log.h"

struct FrError {
  int32_t code;
  std::string message;
};

namespace fresco {

namespace fs = std::filesystem;

namespace {
FrError* host_error_new(int32_t code, const char* message) noexcept {
  try {
    return new FrError{code, message ? message : ""};
  } catch (...) {
    return nullptr;
  }
}

void host_log(int32_t level, const char* plugin, const char* message) noexcept {
  try {
    const std::string text =
        std::string("[") + (plugin ? plugin : "plugin") + "] " + (message ? message : "");
    switch (level) {
      case FR_LOG_DEBUG:
        log().debug("{}", text);
        break;
      case FR_LOG_INFO:
        log().info("{}", text);
        break;
      case FR_LOG_WARN:
        log().warn("{}", text);
        break;
      default:
        log().error("{}", text);
        break;
    }
  } catch (...) {
  }
}

const FrHostApi kHostApi = {sizeof(FrHostApi), FR_ABI_MAJOR, FR_ABI_MINOR, host_error_new, host_log, nullptr};

// Libraries are kept here forever: a plugin is never unloaded while the process runs.
std::vector<std::unique_ptr<boost::dll::shared_library>>& libraries() {
  static auto* libs = new std::vector<std::unique_ptr<boost::dll::shared_library>>();
  return *libs;
}

bool is_plugin_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("libfresco-", 0) == 0 && p.extension() == ".so";
}

std::string dtype_list(uint32_t mask) {
  static const char* names[] = {"f32", "f16", "bf16", "i32", "i8", "u8"};
  std::string s;
  for (int i = 0; i < 6; ++i)
    if (mask & (1u << i)) s += (s.empty() ? "" : "|") + std::string(names[i]);
  return s.empty() ? "none" : s;
}
}  // namespace

void throw_if_error(FrError* err, const std::string& context) {
  if (!err) return;
  std::unique_ptr<FrError> owned(err);
  throw Error(ErrorCode::kInternal,
              context + ": " + owned->message + " (plugin error code " + std::to_string(owned->code) + ")");
}

PluginRegistry& PluginRegistry::instance() {
  static auto* r = new PluginRegistry();  // never destroyed: plugins outlive every static
  return *r;
}

const FrHostApi* PluginRegistry::host_api() const {
  return &kHostApi;
}

std::vector<std::pair<std::string, std::string>> PluginRegistry::search_dirs(
    const std::vector<std::string>& explicit_paths) const {
  std::vector<std::pair<std::string, std::string>> dirs;
  for (const auto& p : explicit_paths) dirs.emplace_back(p, "explicit");
  if (const char* env = std::getenv("FRESCO_PLUGIN_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t colon = s.find(':', start);
      const std::string part =
          s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!part.empty()) dirs.emplace_back(part, "FRESCO_PLUGIN_PATH");
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  dirs.emplace_back(FRESCO_PLUGIN_INSTALL_DIR, "install directory");
  try {
    const auto here = boost::dll::this_line_location().parent_path();
    dirs.emplace_back((here / "fresco").string(), "plugin folder beside libfresco");  // a relocated install
    dirs.emplace_back(here.string(), "directory of libfresco");                       // the build tree
  } catch (const std::exception&) {
  }
  return dirs;
}

int PluginRegistry::load_default(const std::vector<std::string>& explicit_paths) {
  int n = 0;
  for (const auto& [dir, why] : search_dirs(explicit_paths)) {
    std::error_code ec;
    const fs::path p(dir);
    if (!p.is_absolute()) {
      log().warn("plugin search: '{}' ({}) is relative; the current directory is never searched", dir, why);
      continue;
    }
    if (fs::is_regular_file(p, ec)) {
      n += load_file(p.string()) ? 1 : 0;
      continue;
    }
    if (!fs::is_directory(p, ec)) {  // the default folders may be absent; a path the user gave should not
      if (why == "FRESCO_PLUGIN_PATH" || why == "explicit")
        log().warn("plugin search: '{}' ({}) does not exist", dir, why);
      else
        log().debug("plugin search: {} ({}) does not exist", dir, why);
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(p, ec))
      if (is_plugin_file(e.path())) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    log().debug("plugin search: {} ({}): {} candidate(s)", dir, why, files.size());
    for (const auto& f : files) n += load_file(f.string()) ? 1 : 0;
  }
  return n;
}

bool PluginRegistry::refuse(const std::string& path, const std::string& reason) {
  log().debug("plugin refused: {}: {}", path, reason);
  refused_.push_back({path, reason});
  return false;
}

namespace {
// The dynamic loader's own words from Boost.DLL's message ("boost::dll::shared_library::load() failed
// (dlerror system message: WHAT): Bad file descriptor", whose errno part is stale), else the message.
std::string loader_message(const std::string& what) {
  const std::string tag = "dlerror system message: ";
  const size_t at = what.find(tag);
  const size_t end = what.rfind(')');
  if (at == std::string::npos || end == std::string::npos || end < at + tag.size()) return what;
  return what.substr(at + tag.size(), end - at - tag.size());
}

// Opens a plugin file and runs every check that needs no registry: entry symbols, ABI version, init, struct
// sizes, kernel-table entries. Returns the refusal reason, or "" with *lib, *info and *plugin filled.
std::string open_plugin(const std::string& path, std::unique_ptr<boost::dll::shared_library>* lib_out,
                        FrAbiInfo* info_out, FrPlugin* plugin_out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return "file not found";
  auto lib = std::make_unique<boost::dll::shared_library>();
  try {
    lib->load(path, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now);
  } catch (const std::exception& e) {
    return "cannot load (missing dependency or not a shared library): " + loader_message(e.what());
  }
  if (!lib->has(FR_PLUGIN_ABI_SYMBOL)) return "missing entry symbol " FR_PLUGIN_ABI_SYMBOL;
  if (!lib->has(FR_PLUGIN_INIT_SYMBOL)) return "missing entry symbol " FR_PLUGIN_INIT_SYMBOL;
  // The entry points are C functions, but a C++ plugin may still throw out of them: that refuses it too.
  FrAbiInfo info{};
  try {
    info = lib->get<FrAbiInfo()>(FR_PLUGIN_ABI_SYMBOL)();
  } catch (const std::exception& e) {
    return std::string(FR_PLUGIN_ABI_SYMBOL " threw: ") + e.what();
  } catch (...) {
    return FR_PLUGIN_ABI_SYMBOL " threw";
  }
  if (info.struct_size < sizeof(FrAbiInfo))
    return "FrAbiInfo.struct_size " + std::to_string(info.struct_size) + " < " +
           std::to_string(sizeof(FrAbiInfo));
  if (info.abi_major != FR_ABI_MAJOR)
    return "wrong ABI major: plugin has " + std::to_string(info.abi_major) + "." +
           std::to_string(info.abi_minor) + ", this fresco speaks " + std::to_string(FR_ABI_MAJOR) + "." +
           std::to_string(FR_ABI_MINOR);
#if FR_ABI_MINOR_MIN > 0  // the window of accepted minors; empty while the oldest accepted minor is 0
  if (info.abi_minor < FR_ABI_MINOR_MIN)
    return "ABI minor " + std::to_string(info.abi_minor) + " is older than the oldest accepted (" +
           std::to_string(FR_ABI_MINOR_MIN) + ")";
#endif
  FrPlugin plugin{};
  plugin.struct_size = sizeof(FrPlugin);
  FrError* err = nullptr;
  try {
    err = lib->get<FrError*(const FrHostApi*, FrPlugin*)>(FR_PLUGIN_INIT_SYMBOL)(&kHostApi, &plugin);
  } catch (const std::exception& e) {
    return std::string(FR_PLUGIN_INIT_SYMBOL " threw: ") + e.what();
  } catch (...) {
    return FR_PLUGIN_INIT_SYMBOL " threw";
  }
  if (err) {
    std::unique_ptr<FrError> owned(err);
    return "init failed: " + owned->message;
  }
  if (plugin.struct_size < sizeof(FrPlugin))
    return "FrPlugin.struct_size " + std::to_string(plugin.struct_size) + " < " +
           std::to_string(sizeof(FrPlugin));
  const FrDeviceApi* dev = plugin.device;
  if (dev && (dev->struct_size < sizeof(FrDeviceApi) || !dev->name))
    return "FrDeviceApi.struct_size " + std::to_string(dev->struct_size) + " < " +
           std::to_string(sizeof(FrDeviceApi)) + " or unnamed device";
  if (dev && !(dev->context_create && dev->context_destroy && dev->arena_alloc && dev->arena_free &&
               dev->host_alloc && dev->host_free && dev->memcpy_async))
    return std::string("device '") + dev->name +
           "' lacks a required function (context_create, context_destroy, arena_alloc, arena_free, "
           "host_alloc, "
           "host_free and memcpy_async must be set)";
  // ABI 1.1's collective backend (1.0 plugins left the field reserved: NULL)
  const auto* comm = info.abi_minor >= 1 ? static_cast<const FrCommApi*>(plugin.comm) : nullptr;
  if (comm && (comm->struct_size < sizeof(FrCommApi) || !comm->name || !comm->device || !comm->group_create ||
               !comm->group_destroy || !comm->comm_create || !comm->comm_destroy || !comm->group_abort))
    return "FrCommApi is malformed (struct_size " + std::to_string(comm->struct_size) + " of " +
           std::to_string(sizeof(FrCommApi)) + "; name, device and every function must be set)";
  if (info.abi_minor < 1) plugin.comm = nullptr;
  if (plugin.n_kernels && !plugin.kernels)
    return "n_kernels is " + std::to_string(plugin.n_kernels) + " but no table";
  if (plugin.n_schemas && !plugin.schemas)
    return "n_schemas is " + std::to_string(plugin.n_schemas) + " but no table";
  for (uint32_t i = 0; i < plugin.n_schemas; ++i) {
    const FrOpSchema& s = plugin.schemas[i];
    if (s.struct_size < sizeof(FrOpSchema) || !s.name)
      return "op schema " + std::to_string(i) + " is malformed (struct_size " +
             std::to_string(s.struct_size) + " of " + std::to_string(sizeof(FrOpSchema)) + ", name missing?)";
  }
  for (uint32_t i = 0; i < plugin.n_kernels; ++i) {
    const FrKernelDef& k = plugin.kernels[i];
    if (k.struct_size < sizeof(FrKernelDef) || !k.op_name || !k.device || !k.run)
      return "kernel table entry " + std::to_string(i) + " is malformed (struct_size " +
             std::to_string(k.struct_size) + " of " + std::to_string(sizeof(FrKernelDef)) +
             ", op/device/run missing?)";
  }
  *lib_out = std::move(lib);
  *info_out = info;
  *plugin_out = plugin;
  return {};
}
}  // namespace

PluginProbe PluginRegistry::probe_file(const std::string& path_in) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(fs::path(path_in), ec);
  PluginProbe r;
  r.path = ec ? path_in : canon.string();
  std::unique_ptr<boost::dll::shared_library> lib;
  r.reason = open_plugin(r.path, &lib, &r.abi, &r.table);
  r.ok = r.reason.empty();
  if (r.ok) libraries().push_back(std::move(lib));  // kept loaded: the tables point into it
  return r;
}

bool PluginRegistry::load_file(const std::string& path_in) {
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  const fs::path canon = fs::weakly_canonical(fs::path(path_in), ec);
  const std::string path = ec ? path_in : canon.string();
  for (const auto& s : seen_paths_)
    if (s == path) return false;
  seen_paths_.push_back(path);
  std::unique_ptr<boost::dll::shared_library> lib;
  FrAbiInfo info{};
  FrPlugin plugin{};
  const std::string why = open_plugin(path, &lib, &info, &plugin);
  if (!why.empty()) return refuse(path, why);
  const std::string name = info.name ? info.name : "";
  for (const auto& l : loaded_)
    if (l.name == name) return refuse(path, "a plugin named '" + name + "' is already loaded from " + l.path);
  const FrDeviceApi* dev = plugin.device;
  if (dev && devices_.count(dev->name))
    return refuse(path, std::string("device '") + dev->name + "' already provided");
  const auto* comm = static_cast<const FrCommApi*>(plugin.comm);
  if (comm && comms_.count(comm->device))
    return refuse(path, std::string("a collective backend for device '") + comm->device +
                            "' is already provided by " + comms_.at(comm->device).second);
  // Check the whole kernel table before registering anything.
  for (uint32_t i = 0; i < plugin.n_kernels; ++i) {
    const FrKernelDef& k = plugin.kernels[i];
    auto it = op_ids_.find(k.op_name);
    if (it != op_ids_.end())
      for (const auto& e : kernels_[static_cast<size_t>(it->second)])
        if (e.device == k.device && (e.def->dtype_mask & k.dtype_mask))
          return refuse(path, std::string("duplicate kernel (") + k.op_name + ", " + k.device + ", " +
                                  dtype_list(e.def->dtype_mask & k.dtype_mask) + "): already provided by " +
                                  e.plugin_path);
    for (uint32_t j = 0; j < i; ++j)
      if (std::string(plugin.kernels[j].op_name) == k.op_name &&
          std::string(plugin.kernels[j].device) == k.device && (plugin.kernels[j].dtype_mask & k.dtype_mask))
        return refuse(
            path, std::string("duplicate kernel (") + k.op_name + ", " + k.device + ") inside the plugin");
  }
  for (uint32_t i = 0; i < plugin.n_schemas; ++i) {
    auto it = schemas_.find(plugin.schemas[i].name);
    if (it != schemas_.end())
      return refuse(path, std::string("op schema '") + plugin.schemas[i].name + "' is already declared by " +
                              it->second.second);
    for (uint32_t j = 0; j < i; ++j)
      if (std::string(plugin.schemas[j].name) == plugin.schemas[i].name)
        return refuse(
            path, std::string("op schema '") + plugin.schemas[i].name + "' declared twice inside the plugin");
  }
  for (uint32_t i = 0; i < plugin.n_schemas; ++i)
    schemas_[plugin.schemas[i].name] = {&plugin.schemas[i], path};
  for (uint32_t i = 0; i < plugin.n_kernels; ++i) {
    const FrKernelDef& k = plugin.kernels[i];
    auto [it, inserted] = op_ids_.emplace(k.op_name, static_cast<int32_t>(kernels_.size()));
    if (inserted) kernels_.emplace_back();
    kernels_[static_cast<size_t>(it->second)].push_back({&k, k.device, path});
  }
  if (dev) devices_[dev->name] = dev;
  if (comm) comms_[comm->device] = {comm, path};
  loaded_.push_back({path, name, info.version ? info.version : "", dev ? dev->name : "", info.abi_major,
                     info.abi_minor, plugin.n_kernels, plugin.n_schemas});
  libraries().push_back(std::move(lib));
  log().debug("plugin loaded: {} ({} {}, ABI {}.{}, {} kernels)", path, name, loaded_.back().version,
              info.abi_major, info.abi_minor, plugin.n_kernels);
  return true;
}

std::vector<PluginInfo> PluginRegistry::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_;
}

std::vector<RefusedPlugin> PluginRegistry::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

std::vector<std::string> PluginRegistry::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> d;
  for (const auto& [n, api] : devices_) d.push_back(n);
  return d;
}

const FrCommApi* PluginRegistry::comm(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = comms_.find(device);
  return it == comms_.end() ? nullptr : it->second.first;
}

const FrDeviceApi* PluginRegistry::device(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : it->second;
}

int32_t PluginRegistry::op_id(const std::string& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = op_ids_.find(op);
  return it == op_ids_.end() ? -1 : it->second;
}

const FrOpSchema* PluginRegistry::schema(const std::string& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = schemas_.find(op);
  return it == schemas_.end() ? nullptr : it->second.first;
}

std::vector<std::string> PluginRegistry::schema_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> n;
  for (const auto& [k, v] : schemas_) n.push_back(k);
  return n;
}

const FrKernelDef* PluginRegistry::kernel(int32_t id, const std::string& dev, uint32_t dtype) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || static_cast<size_t>(id) >= kernels_.size()) return nullptr;
  for (const auto& e : kernels_[static_cast<size_t>(id)])
    if (e.device == dev && (e.def->dtype_mask & FR_DTYPE_BIT(dtype))) return e.def;
  return nullptr;
}

std::string PluginRegistry::kernel_owner(int32_t id, const std::string& dev, uint32_t dtype) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || static_cast<size_t>(id) >= kernels_.size()) return {};
  for (const auto& e : kernels_[static_cast<size_t>(id)])
    if (e.device == dev && (e.def->dtype_mask & FR_DTYPE_BIT(dtype))) return e.plugin_path;
  return {};
}

}  // namespace fresco
