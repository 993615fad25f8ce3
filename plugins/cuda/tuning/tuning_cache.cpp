// TuningCache (tuning_cache.h).
#include "tuning/tuning_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace fresco::cuda {

namespace {
constexpr const char* kHeader = "# fresco CUDA tuning cache v1: key, index, description, times (ms)";

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
    std::stringstream ts(f[3]);
    for (std::string t; std::getline(ts, t, ',');) {
      if (t.empty()) continue;
      c.ms.push_back(std::stof(t, &used));
      if (used != t.size()) return false;
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

const TunedChoice* TuningCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void TuningCache::put(const std::string& key, const TunedChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (key.empty() || !clean(key) || !clean(choice.name) || choice.index < 0) return;  // not representable
  entries_[key] = choice;
  if (path_.empty() || write_failed_) return;
  std::error_code ec;
  const std::filesystem::path p(path_);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  const bool fresh = !std::filesystem::exists(p, ec);
  std::ofstream out(path_, std::ios::app);
  if (out) {
    std::ostringstream line;
    if (fresh) line << kHeader << '\n';
    line << key << '\t' << choice.index << '\t' << choice.name << '\t';
    for (size_t i = 0; i < choice.ms.size(); ++i) line << (i ? "," : "") << choice.ms[i];
    line << '\n';
    out << line.str();  // one write per entry (O_APPEND keeps concurrent writers' lines whole)
    out.flush();
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
