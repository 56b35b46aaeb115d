// Runs the built `tune` binary (TUNE_BINARY) like a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace tune::testing {

struct ProcessRun {
  int code;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs tune with `args` (each passed as one word, no shell expansion) in `cwd`.
inline ProcessRun Tune(const std::vector<std::string>& args,
                       const std::string& cwd = TUNE_SOURCE_DIR) {
  TempDir tmp;
  std::string cmd = "cd '" + cwd + "' && '" + std::string(TUNE_BINARY) + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >" + (tmp.path() / "out").string() + " 2>" + (tmp.path() / "err").string();
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(tmp.path() / "out"),
          Slurp(tmp.path() / "err")};
}

// Tune() under coreutils' `timeout`: killed (and code 124) when it runs past `seconds`, so that a
// hang fails its test instead of stopping the suite. `seconds_taken` receives the wall time.
inline ProcessRun TuneWithin(double seconds, const std::vector<std::string>& args,
                             double* seconds_taken = nullptr,
                             const std::string& cwd = TUNE_SOURCE_DIR) {
  TempDir tmp;
  std::string cmd = "cd '" + cwd + "' && timeout -k 5 " + std::to_string(seconds) + " '" +
                    std::string(TUNE_BINARY) + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >" + (tmp.path() / "out").string() + " 2>" + (tmp.path() / "err").string();
  const auto start = std::chrono::steady_clock::now();
  int status = std::system(cmd.c_str());
  if (seconds_taken != nullptr) {
    *seconds_taken =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(tmp.path() / "out"),
          Slurp(tmp.path() / "err")};
}

}  // namespace tune::testing
