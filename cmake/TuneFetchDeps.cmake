# TUNE_FETCH_DEPS: the small libraries tune needs -- fmt, spdlog, CLI11, nlohmann_json, GoogleTest
# (with the tests) and SQLite -- built from pinned release sources with FetchContent, for a machine
# where they cannot be installed (no root). OFF: each is found with find_package, and one that is
# not found is fetched all the same (a STATUS line says so). The download needs the network;
# FETCHCONTENT_SOURCE_DIR_<NAME> (FMT, SPDLOG, CLI11, NLOHMANN_JSON, GOOGLETEST, SQLITE3) points
# one at a local copy of the same release instead (scripts/check-floor-versions.sh --fetch).
#
# The pins are Ubuntu 22.04's versions, the oldest tune supports (docs/overview.md): one build
# against them proves both. The hashes are those of the release archives as Homebrew and Bazel
# builds pin them.
#
# Only CMake 3.22 features (FetchContent_Populate, no FIND_PACKAGE_ARGS).
option(TUNE_FETCH_DEPS
       "Build fmt, spdlog, CLI11, nlohmann_json, GoogleTest and SQLite from pinned sources (FetchContent) instead of find_package"
       OFF)

include(FetchContent)
# Extracted files get the time of the extraction (CMake >= 3.24 asks): a rebuild follows a new pin.
if(POLICY CMP0135)
  cmake_policy(SET CMP0135 NEW)
endif()

FetchContent_Declare(fmt
  URL https://github.com/fmtlib/fmt/archive/8.1.1.tar.gz
  URL_HASH SHA256=3d794d3cf67633b34b2771eb9f073bde87e846e0d395d254df7b211ef1ec7346)
FetchContent_Declare(spdlog
  URL https://github.com/gabime/spdlog/archive/v1.9.2.tar.gz
  URL_HASH SHA256=6fff9215f5cb81760be4cc16d033526d1080427d236e86d70bb02994f85e3d38)
FetchContent_Declare(CLI11
  URL https://github.com/CLIUtils/CLI11/archive/v2.1.2.tar.gz
  URL_HASH SHA256=26291377e892ba0e5b4972cdfd4a2ab3bf53af8dac1f4ea8fe0d1376b625c8cb)
FetchContent_Declare(nlohmann_json
  URL https://github.com/nlohmann/json/archive/v3.10.5.tar.gz
  URL_HASH SHA256=5daca6ca216495edf89d167f808d1d03c4a4d929cef7da5e10f135ae1540c7e4)
FetchContent_Declare(googletest
  URL https://github.com/google/googletest/archive/release-1.11.0.tar.gz
  URL_HASH SHA256=b4870bf121ff7795ba20d20bcdd8627b8e088f2d1dab299a031c1034eddc93d5)
# The amalgamation (sqlite3.c, sqlite3.h) of SQLite 3.37.2, in its autoconf archive.
FetchContent_Declare(sqlite3
  URL https://www.sqlite.org/2022/sqlite-autoconf-3370200.tar.gz
  URL_HASH SHA256=4089a8d9b467537b3f246f217b84cd76e00b1d1a971fe5aca1e30e230e46b2d8)

# _tune_populate(<name>): the content's source (downloaded, or FETCHCONTENT_SOURCE_DIR_<NAME>) in
# <name>_SOURCE_DIR, with a STATUS line saying where it came from.
macro(_tune_populate name)
  FetchContent_GetProperties(${name})
  string(TOLOWER ${name} _tune_lower)
  if(NOT ${_tune_lower}_POPULATED)
    FetchContent_Populate(${name})
  endif()
  string(TOUPPER ${name} _tune_upper)
  if(FETCHCONTENT_SOURCE_DIR_${_tune_upper})
    set(_tune_origin "FETCHCONTENT_SOURCE_DIR_${_tune_upper}")
  else()
    set(_tune_origin "the pinned release archive")
  endif()
endmacro()

# The fetched fmt and spdlog are shared libraries, as the distributions' are: tune_core, tune_train
# and the tune binary then share one spdlog registry (its logger and level), as with the system's
# (static copies linked into each shared library would each keep their own). They sit beside
# libtune_core.so in the build tree and in lib/tune when installed (cmake/TuneInstall.cmake).
function(_tune_fetched_shared target)
  set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
                                             BUILD_RPATH "$ORIGIN" INSTALL_RPATH "$ORIGIN")
  install(TARGETS ${target} LIBRARY DESTINATION lib/tune)
endfunction()

# _tune_system_headers(<target>...): the targets' include directories as system directories for
# their users, as an installed package's are: tune's warnings (errors with TUNE_WERROR) stay off
# the fetched libraries' headers.
function(_tune_system_headers)
  foreach(target ${ARGN})
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(dirs)
      set_property(TARGET ${target} APPEND PROPERTY INTERFACE_SYSTEM_INCLUDE_DIRECTORIES ${dirs})
    endif()
  endforeach()
endfunction()

# tune_fetch_dependency(<package>): fmt, spdlog, CLI11, nlohmann_json, GTest or SQLite3, built
# from the pinned source; the same targets as the package's find_package (fmt::fmt,
# spdlog::spdlog, CLI11::CLI11, nlohmann_json::nlohmann_json, GTest::gtest and GTest::gtest_main,
# SQLite::SQLite3). A macro: the variables it sets (SQLite3_VERSION, ...) are the caller's.
macro(tune_fetch_dependency package)
  if(${package} STREQUAL "fmt")
    _tune_populate(fmt)
    set(FMT_INSTALL OFF CACHE BOOL "" FORCE)
    set(_tune_shared ${BUILD_SHARED_LIBS})
    set(BUILD_SHARED_LIBS ON)
    add_subdirectory(${fmt_SOURCE_DIR} ${fmt_BINARY_DIR} EXCLUDE_FROM_ALL)
    set(BUILD_SHARED_LIBS ${_tune_shared})
    _tune_fetched_shared(fmt)
    _tune_system_headers(fmt)
    set(TUNE_FMT_FETCHED TRUE)
    message(STATUS "tune: fmt 8.1.1 built from ${_tune_origin} (${fmt_SOURCE_DIR})")
  elseif(${package} STREQUAL "spdlog")
    if(NOT TARGET fmt::fmt)
      message(FATAL_ERROR "tune_fetch_dependency(spdlog) needs fmt::fmt first")
    endif()
    _tune_populate(spdlog)
    # spdlog against the fmt above (SPDLOG_FMT_EXTERNAL), as Debian and Ubuntu build it (spdlog
    # looks for fmt only where there is no fmt::fmt target yet).
    set(SPDLOG_FMT_EXTERNAL ON CACHE BOOL "" FORCE)
    set(SPDLOG_BUILD_SHARED ON CACHE BOOL "" FORCE)
    set(SPDLOG_INSTALL OFF CACHE BOOL "" FORCE)
    add_subdirectory(${spdlog_SOURCE_DIR} ${spdlog_BINARY_DIR} EXCLUDE_FROM_ALL)
    _tune_fetched_shared(spdlog)
    _tune_system_headers(spdlog)
    message(STATUS "tune: spdlog 1.9.2 built from ${_tune_origin} (${spdlog_SOURCE_DIR}), "
                   "against the fetched fmt")
  elseif(${package} STREQUAL "CLI11")
    _tune_populate(CLI11)
    add_subdirectory(${cli11_SOURCE_DIR} ${cli11_BINARY_DIR} EXCLUDE_FROM_ALL)
    _tune_system_headers(CLI11)
    message(STATUS "tune: CLI11 2.1.2 taken from ${_tune_origin} (${cli11_SOURCE_DIR})")
  elseif(${package} STREQUAL "nlohmann_json")
    _tune_populate(nlohmann_json)
    set(JSON_BuildTests OFF CACHE BOOL "" FORCE)
    # The multi-header layout, as Debian and Ubuntu package it: 3.10's single header has no
    # nlohmann/json_fwd.hpp, which src/tokenizers/tokenizer.h includes.
    set(JSON_MultipleHeaders ON CACHE BOOL "" FORCE)
    add_subdirectory(${nlohmann_json_SOURCE_DIR} ${nlohmann_json_BINARY_DIR} EXCLUDE_FROM_ALL)
    _tune_system_headers(nlohmann_json)
    message(STATUS "tune: nlohmann_json 3.10.5 taken from ${_tune_origin} "
                   "(${nlohmann_json_SOURCE_DIR})")
  elseif(${package} STREQUAL "GTest")
    _tune_populate(googletest)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
    add_subdirectory(${googletest_SOURCE_DIR} ${googletest_BINARY_DIR} EXCLUDE_FROM_ALL)
    # GoogleTest 1.11 adds -Werror to its own flags; a newer compiler's new warnings in it are
    # not tune's to fix.
    foreach(_tune_gtest gtest gtest_main gmock gmock_main)
      target_compile_options(${_tune_gtest} PRIVATE -Wno-error)
    endforeach()
    _tune_system_headers(gtest gtest_main gmock gmock_main)
    foreach(_tune_gtest gtest gtest_main gmock gmock_main)
      if(NOT TARGET GTest::${_tune_gtest})  # GoogleTest 1.11 names them so itself
        add_library(GTest::${_tune_gtest} ALIAS ${_tune_gtest})
      endif()
    endforeach()
    message(STATUS "tune: GoogleTest 1.11.0 built from ${_tune_origin} (${googletest_SOURCE_DIR})")
  elseif(${package} STREQUAL "SQLite3")
    _tune_populate(sqlite3)
    enable_language(C)
    # A static library, with the JSON functions (json_each) that tune_sqlite needs and that 3.37
    # compiles only with SQLITE_ENABLE_JSON1; the other options as Debian and Ubuntu build it.
    add_library(tune_sqlite3 STATIC ${sqlite3_SOURCE_DIR}/sqlite3.c)
    target_include_directories(tune_sqlite3 SYSTEM PUBLIC ${sqlite3_SOURCE_DIR})
    # HAVE_USLEEP and the others: what SQLite's configure finds on Linux (without HAVE_USLEEP the
    # busy handler sleeps in whole seconds, so a busy timeout under 1 s does not wait at all).
    target_compile_definitions(tune_sqlite3 PRIVATE SQLITE_ENABLE_JSON1 SQLITE_ENABLE_COLUMN_METADATA
                               SQLITE_ENABLE_UNLOCK_NOTIFY SQLITE_ENABLE_DBSTAT_VTAB
                               SQLITE_SECURE_DELETE SQLITE_MAX_VARIABLE_NUMBER=250000
                               SQLITE_THREADSAFE=1 HAVE_USLEEP=1 HAVE_FDATASYNC=1
                               HAVE_LOCALTIME_R=1 HAVE_GMTIME_R=1 HAVE_POSIX_FALLOCATE=1
                               HAVE_MALLOC_USABLE_SIZE=1 HAVE_STRCHRNUL=1)
    target_link_libraries(tune_sqlite3 PUBLIC Threads::Threads ${CMAKE_DL_LIBS} m)
    add_library(SQLite::SQLite3 ALIAS tune_sqlite3)
    file(STRINGS ${sqlite3_SOURCE_DIR}/sqlite3.h _tune_sqlite_version_line
         REGEX "^#define SQLITE_VERSION +\"")
    string(REGEX REPLACE ".*\"(.*)\".*" "\\1" SQLite3_VERSION "${_tune_sqlite_version_line}")
    set(SQLite3_FOUND TRUE)
    set(SQLite3_INCLUDE_DIRS ${sqlite3_SOURCE_DIR})
    set(SQLite3_LIBRARIES tune_sqlite3)
    # Built with JSON1 above: the run-time probe of a system SQLite's json_each is not needed.
    set(TUNE_SQLITE_JSON_EACH_WORKS TRUE)
    message(STATUS "tune: SQLite ${SQLite3_VERSION} built from ${_tune_origin} "
                   "(${sqlite3_SOURCE_DIR}/sqlite3.c, with JSON1)")
  else()
    message(FATAL_ERROR "tune_fetch_dependency: no pinned source for '${package}'")
  endif()
endmacro()

# tune_dependency(<package> [<version>]): find_package(<package> [<version>]), or with
# TUNE_FETCH_DEPS, or when it is not found, tune_fetch_dependency(<package>).
macro(tune_dependency package)
  if(TUNE_FETCH_DEPS OR (${package} STREQUAL "spdlog" AND TUNE_FMT_FETCHED))
    # (A system spdlog would bring the system's fmt along with the fetched one.)
    tune_fetch_dependency(${package})
  else()
    find_package(${package} ${ARGN} QUIET)
    if(NOT ${package}_FOUND)
      string(JOIN " " _tune_wanted ${package} ${ARGN})
      message(STATUS "tune: ${_tune_wanted} not found: building it from its pinned source "
                     "(FetchContent; -DTUNE_FETCH_DEPS=ON does so for all of them)")
      tune_fetch_dependency(${package})
    endif()
  endif()
endmacro()
