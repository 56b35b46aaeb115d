// Every file of tests/fuzz/corpus/<target>/ (the seeds and the smallest input of every finding)
// through its fuzz target once, in the ordinary build: the targets keep building without clang,
// and a finding that comes back fails `make test` (a crash ends this program; a sanitizer build,
// `make test-sanitize`, also catches what does not crash).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace tune::fuzz {
namespace {

namespace fs = std::filesystem;

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// One test for all targets: a parameterised test's ctest names would carry GetParam()'s bytes.
TEST(FuzzReplay, EveryCorpusFileOfEveryTargetIsReadOrRefused) {
  spdlog::set_level(spdlog::level::off);  // the readers warn about bad inputs
  for (const FuzzTarget& target : kFuzzTargets) {
    const fs::path dir = fs::path(TUNE_FUZZ_CORPUS_DIR) / target.name;
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    EXPECT_FALSE(ec) << dir << ": " << ec.message();
    EXPECT_FALSE(files.empty()) << dir << " holds no seed";
    for (const fs::path& file : files) {
      SCOPED_TRACE(file.string());
      EXPECT_EQ(target.run(ReadBytes(file)), 0);
    }
  }
  spdlog::set_level(spdlog::level::info);
}

}  // namespace
}  // namespace tune::fuzz
