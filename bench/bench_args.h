// Command-line options of the benchmark programs: "--name value" pairs with defaults; an unknown option or a
// missing value is an error (exit 64) naming it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace fresco::bench {

class Args {
 public:
  // `defaults` names every accepted option with its default value.
  Args(int argc, char** argv, std::map<std::string, std::string> defaults) : values_(std::move(defaults)) {
    for (int i = 1; i < argc; i += 2) {
      const std::string name = argv[i];
      if (name.rfind("--", 0) != 0 || !values_.count(name.substr(2)) || i + 1 >= argc) {
        std::fprintf(stderr, "bench: unknown option or missing value: %s\n", name.c_str());
        std::exit(64);
      }
      values_[name.substr(2)] = argv[i + 1];
    }
  }
  std::string str(const std::string& k) const { return values_.at(k); }
  long long integer(const std::string& k) const { return std::atoll(values_.at(k).c_str()); }
  double real(const std::string& k) const { return std::atof(values_.at(k).c_str()); }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace fresco::bench
