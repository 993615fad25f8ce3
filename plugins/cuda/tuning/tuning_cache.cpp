// TuningCache (tuning_cache.h).
#include "tuning/tuning_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <locale>
#include <sstream>
#include <utility>

namespace fresco::cuda {

namespace {
constexpr const char* kHeader = "# fresco CUDA tuning cache v1: key, index, description, times";

bool clean(const std::string& s) {
  return s.find_first_of("\t\n\r") == std::string::npos;
}

bool parse_line(const std::string& line, std::string& key, TunedChoice& c) {
  std::vector<std::string> f;  // fields, the empty last one (no times) included
  for (size_t start = 0;;) {
    const size_t tab = line.find('\t', start);
    f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  if (f.size() != 4 || f[0].empty()) return false;
  try {
    size_t used = 0;
    c.index = std::stoi(f[1], &used);
    if (used != f[1].size() || c.index < 0) return false;
    c.name = f[2];
    c.ms.clear();
    std::istringstream ts(f[3]);
    for (std::string t; std::getline(ts, t, ',');) {
      if (t.empty()) continue;
      std::istringstream v(t);
      v.imbue(std::locale::classic());
      float x = 0.0f;
      if (!(v >> x) || !(v >> std::ws).eof()) return false;
      c.ms.push_back(x);
    }
  } catch (const std::exception&) {
    return false;
  }
  key = f[0];
  return true;
}
}  // namespace

TuningCache::TuningCache(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::ifstream in(path_);
  if (!in) return;  // no file yet: the first run writes it
  int lineno = 0, bad = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (lineno == 1 &&
        line != kHeader) {  // not a tuning cache (or another version): neither read nor written
      std::fprintf(
          stderr,
          "[fresco-cuda] %s is not a fresco tuning cache (its first line differs); it is left alone and "
          "choices are kept for this run only\n",
          path_.c_str());
      write_failed_ = true;
      return;
    }
    if (line.empty() || line[0] == '#') continue;
    std::string key;
    TunedChoice c;
    if (parse_line(line, key, c))
      entries_[key] = std::move(c);
    else if (bad++ == 0)
      std::fprintf(stderr,
                   "[fresco-cuda] tuning cache %s: line %d does not parse; skipped (and any like it)\n",
                   path_.c_str(), lineno);
  }
}

std::optional<TunedChoice> TuningCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t TuningCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void TuningCache::put(const std::string& key, const TunedChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (key.empty() || !clean(key) || !clean(choice.name) || choice.index < 0) return;  // not representable
  entries_[key] = choice;
  if (path_.empty() || write_failed_) return;
  // The file's state is looked at before this run's first write only: after it, the file ends with a whole
  // line (other writers append whole lines too).
  bool fresh = false, torn = false;  // no file (or empty) / a last line without its newline
  if (!appended_) {
    std::error_code ec;
    const std::filesystem::path p(path_);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    fresh = !std::filesystem::exists(p, ec) || std::filesystem::file_size(p, ec) == 0;
  }
  if (!appended_ && !fresh) {
    std::ifstream last(path_, std::ios::binary | std::ios::ate);
    if (last && last.tellg() > 0) {
      last.seekg(-1, std::ios::end);
      torn = last.get() != '\n';
    }
  }
  std::ofstream out(path_, std::ios::app);
  if (out) {
    std::ostringstream line;
    line.imbue(std::locale::classic());
    line << std::setprecision(std::numeric_limits<float>::max_digits10);  // times read back exactly
    if (fresh) line << kHeader << '\n';
    if (torn) line << '\n';
    line << key << '\t' << choice.index << '\t' << choice.name << '\t';
    for (size_t i = 0; i < choice.ms.size(); ++i) line << (i ? "," : "") << choice.ms[i];
    line << '\n';
    out << line.str();  // one write per entry (O_APPEND keeps concurrent writers' lines whole)
    out.flush();
    appended_ = static_cast<bool>(out);
  }
  if (!out) {
    write_failed_ = true;
    std::fprintf(stderr,
                 "[fresco-cuda] tuning cache %s cannot be written; choices are kept for this run only "
                 "(FRESCO_CUDA_TUNING_CACHE names another file, or off)\n",
                 path_.c_str());
  }
}

std::string default_tuning_cache_path() {
  if (const char* e = std::getenv("FRESCO_CUDA_TUNING_CACHE")) {
    const std::string v = e;
    return v == "off" ? std::string() : v;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/fresco/cuda-tuning.tsv";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/fresco/cuda-tuning.tsv";
  return {};
}

}  // namespace fresco::cuda
