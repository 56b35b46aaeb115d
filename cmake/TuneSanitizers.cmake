# Sanitizer and fuzzing builds (docs/overview.md, "Fuzzing and sanitizers"). Each wants its own
# build directory: the flags apply to every target of the tree.
#
# TUNE_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer over everything built (GCC or
# clang); any undefined behaviour aborts. `make test-sanitize` builds the LibTorch-free targets
# with it and runs their tests. LibTorch itself is not instrumented (Debian's is not built with
# ASan), so keep TUNE_WITH_TORCH=OFF here.
#
# TUNE_FUZZ (clang only): TUNE_SANITIZE plus libFuzzer's coverage instrumentation, and the fuzz
# targets of tests/fuzz/ (fuzz_<target>, linked with -fsanitize=fuzzer). `make fuzz` runs them.
option(TUNE_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(TUNE_FUZZ "Build the libFuzzer targets of tests/fuzz (clang; implies TUNE_SANITIZE)" OFF)

if(TUNE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TUNE_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14, as `make fuzz` does")
  endif()
  set(TUNE_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(TUNE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
