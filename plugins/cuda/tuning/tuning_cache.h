// The choices that timing makes at prepare (cuBLASLt configurations, cuDNN engine and legacy algorithms),
// kept in a file so that later runs on the same machine make the same choices and so compute the same bits
// (DESIGN section 8: same seed, same machine, bitwise-identical weights). Timing picks the fastest measured
// candidate; without the file, candidates within timing noise of each other could swap between runs.
//
// One line per choice: key, candidate index, the candidate's description and its measured times, separated
// by tabs. The key names the machine and library versions (machine_signature), the problem and the settings
// that shape the candidate list, so one file serves several machines, versions and settings. A later line
// for a key replaces an earlier one. An entry is used only while the candidate at its index still has the
// recorded description; otherwise the caller times again and records anew. Lines that do not parse are
// skipped with a warning, so a damaged file costs a re-tune, never a failure. Several processes tuning the
// same problem at once each time it and append their own line; the last line wins for later runs (a process
// keeps what it chose). Pure C++: no CUDA here.
// Test: tests/plugins/cuda/tuning/test_tuning_cache.cpp.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fresco::cuda {

struct TunedChoice {
  int index = -1;
  std::string name;       // the chosen candidate's description, checked on use
  std::vector<float> ms;  // measured times the caller wants back on a hit (its unit; written exactly)
};

class TuningCache {
 public:
  // path "" = no file: nothing is read or written (every run times afresh).
  explicit TuningCache(std::string path);

  // The entry for key, if any (a copy: a later put may replace it).
  std::optional<TunedChoice> find(const std::string& key) const;
  // Records the entry and appends it to the file. A file that cannot be written, or an existing file that
  // is not a tuning cache (no header line: a mistyped path), is reported once on stderr and the cache goes
  // on in memory only. A last line left without its newline (a writer that died) is closed first.
  void put(const std::string& key, const TunedChoice& choice);

  const std::string& path() const { return path_; }
  size_t size() const;

 private:
  std::string path_;
  std::map<std::string, TunedChoice> entries_;
  mutable std::mutex mutex_;
  bool write_failed_ = false;
  bool appended_ = false;  // this run has written a line (the file then ends with a whole one)
};

// The default file: $FRESCO_CUDA_TUNING_CACHE if set ("" or "off" = none), else
// $XDG_CACHE_HOME/fresco/cuda-tuning.tsv, else $HOME/.cache/fresco/cuda-tuning.tsv, else none.
std::string default_tuning_cache_path();

}  // namespace fresco::cuda
