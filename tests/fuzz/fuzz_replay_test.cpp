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

class FuzzReplay : public ::testing::TestWithParam<FuzzTarget> {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::off); }
  void TearDown() override { spdlog::set_level(spdlog::level::info); }
};

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_P(FuzzReplay, EveryCorpusFileIsReadOrRefused) {
  const fs::path dir = fs::path(TUNE_FUZZ_CORPUS_DIR) / GetParam().name;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  ASSERT_FALSE(ec) << dir << ": " << ec.message();
  ASSERT_FALSE(files.empty()) << dir << " holds no seed";
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_EQ(GetParam().run(ReadBytes(file)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kFuzzTargets),
                         [](const ::testing::TestParamInfo<FuzzTarget>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace tune::fuzz
