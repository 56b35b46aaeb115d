// Small helpers shared by the benchmark programs: flag parsing and fatal errors. Benchmarks are
// programs, not library code, so a failed call ends the process with a message (exit code 1).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune::bench {

[[noreturn]] inline void Die(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(1);
}

inline void Check(const Status& status, std::string_view what) {
  if (!status.ok()) Die(fmt::format("{}: {}", what, status.ToString()));
}

template <typename T>
T Take(Result<T> result, std::string_view what) {
  if (!result.ok()) Die(fmt::format("{}: {}", what, result.status().ToString()));
  return std::move(result).value();
}

// "--name=value" or "--name value" flags; positional arguments are rejected.
class Flags {
 public:
  Flags(int argc, char** argv) : args_(argv + 1, argv + argc) {}

  // The value of --name, or `fallback` when absent.
  std::string Get(std::string_view name, std::string fallback) const {
    const std::string flag = "--" + std::string(name);
    for (size_t i = 0; i < args_.size(); ++i) {
      if (args_[i] == flag) {
        if (i + 1 >= args_.size()) Die(fmt::format("{} needs a value", flag));
        return args_[i + 1];
      }
      if (args_[i].rfind(flag + "=", 0) == 0) return args_[i].substr(flag.size() + 1);
    }
    return fallback;
  }
  bool Has(std::string_view name) const {
    const std::string flag = "--" + std::string(name);
    for (const auto& a : args_) {
      if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
    }
    return false;
  }
  int64_t GetInt(std::string_view name, int64_t fallback) const {
    std::string v = Get(name, std::to_string(fallback));
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') Die(fmt::format("--{}: not an integer: '{}'", name, v));
    return n;
  }
  double GetDouble(std::string_view name, double fallback) const {
    std::string v = Get(name, fmt::format("{}", fallback));
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') Die(fmt::format("--{}: not a number: '{}'", name, v));
    return d;
  }

 private:
  std::vector<std::string> args_;
};

// "a,b,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace tune::bench
