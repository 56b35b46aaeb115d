#include "fuzz/fuzz_scratch.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace tune::fuzz {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "tune-fuzz-";

// Removes the scratch directories of fuzzing processes that are gone: libFuzzer leaves through
// _Exit on a crash, a timeout or a signal, so their destructors never ran.
void RemoveOrphans(const fs::path& tmp) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string pid = name.substr(kPrefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
    fs::remove_all(entry.path(), ec);
  }
}

// One directory per process, named by its pid, so that the next run can tell whose is orphaned.
struct Scratch {
  fs::path path;
  Scratch() {
    const fs::path tmp = fs::temp_directory_path();
    RemoveOrphans(tmp);
    path = tmp / (std::string(kPrefix) + std::to_string(getpid()));
    std::error_code ec;
    fs::remove_all(path, ec);  // a recycled pid's
    if (!fs::create_directory(path, ec) || ec) {
      std::fprintf(stderr, "tune fuzz: cannot create %s: %s\n", path.c_str(), ec.message().c_str());
      std::abort();
    }
    fs::permissions(path, fs::perms::owner_all, ec);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

const fs::path& ScratchDir() {
  static const Scratch scratch;
  return scratch.path;
}

std::string WriteScratchFile(const std::string& name, std::string_view bytes) {
  const fs::path path = ScratchDir() / name;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "tune fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

}  // namespace tune::fuzz
