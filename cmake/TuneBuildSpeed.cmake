# How a fresh clone builds fast enough for `make test` on a 2-core machine (docs/benchmarks.md,
# "Build and test time", measures each step).
#
# TUNE_PCH: precompiled headers. The third-party headers every translation unit of a target
# parses -- LibTorch's torch/torch.h (16 s alone per unit on the CI machine's kind), GoogleTest,
# nlohmann/json, fmt, spdlog, CLI11 -- are parsed once per target. Off: each unit parses them.
option(TUNE_PCH "Precompile the heavy third-party headers of each target" ON)

# The standard and third-party headers of the libraries and the binary (spdlog only where the
# target links it: its SPDLOG_FMT_EXTERNAL comes with spdlog::spdlog).
set(TUNE_PCH_BASE <algorithm> <cstdint> <functional> <map> <memory> <optional> <string>
    <vector> <nlohmann/json.hpp> <fmt/format.h>)
set(TUNE_PCH_LOGGING ${TUNE_PCH_BASE} <spdlog/spdlog.h>)
set(TUNE_PCH_TESTS ${TUNE_PCH_BASE} <gtest/gtest.h>)

# tune_precompile(<target> <header>...): the headers, precompiled for <target> when TUNE_PCH.
function(tune_precompile target)
  if(TUNE_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()

# tune_test_program(<target>): a test or test driver. Its own code runs for milliseconds around
# the libraries (built optimised), so it is compiled without optimisation and with line tables
# only (-O0 -g1; gdb still shows file and line): 2-3x less compile time per unit than -O2 -g.
function(tune_test_program target)
  target_compile_options(${target} PRIVATE -O0 -g1)
endfunction()

# TUNE_DEBUG_INFO: how much debug information RelWithDebInfo (the Makefile's build type) keeps.
# "lines" (the default): -g1, line tables and function names, enough for backtraces and for gdb
# to show where it stopped (not local variables): ~27% less compile time per library unit than
# -g (measured: 21.6 s -> 15.8 s for src/config/train_config.cpp, 25.6 s -> 18.9 s for
# src/samplers/tpe.cpp, 53 s -> 31 s for src/torch/torch_models.cpp). "full": -g.
set(TUNE_DEBUG_INFO "lines" CACHE STRING "RelWithDebInfo's debug information: lines (-g1) or full (-g)")
set_property(CACHE TUNE_DEBUG_INFO PROPERTY STRINGS lines full)
if(NOT TUNE_DEBUG_INFO MATCHES "^(lines|full)$")
  message(FATAL_ERROR "TUNE_DEBUG_INFO is '${TUNE_DEBUG_INFO}'; valid: lines, full")
endif()
if(TUNE_DEBUG_INFO STREQUAL "lines")
  string(REGEX REPLACE "(^| )-g( |$)" "\\1-g1\\2" CMAKE_CXX_FLAGS_RELWITHDEBINFO
                       "${CMAKE_CXX_FLAGS_RELWITHDEBINFO}")
endif()
