// libFuzzer's entry points for one target of fuzz_targets.h: fuzz_<name> is this file compiled
// with TUNE_FUZZ_ENTRY naming the target's function (tests/fuzz/CMakeLists.txt).
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // warnings about bad inputs are expected, by millions
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tune::fuzz::TUNE_FUZZ_ENTRY(std::string_view(reinterpret_cast<const char*>(data), size));
}
