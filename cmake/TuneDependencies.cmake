# Third-party packages, all from Debian 12 (scripts/install-deps.sh installs them). The small ones
# come from pinned sources instead with -DTUNE_FETCH_DEPS=ON, or when not found
# (cmake/TuneFetchDeps.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/TuneFetchDeps.cmake)
find_package(Threads REQUIRED)
tune_dependency(nlohmann_json 3.10)
tune_dependency(fmt)
tune_dependency(spdlog)
tune_dependency(CLI11)
# tune_sqlite needs RETURNING (3.35) and json_each, which is built in since 3.38 and was a
# compile-time option before (Ubuntu 22.04's 3.37.2 has it): checked by feature, here and again
# when a database opens (SqliteFeatureProblem), since the library run may not be the one built with.
tune_dependency(SQLite3 3.35)
if(NOT DEFINED TUNE_SQLITE_JSON_EACH_WORKS)
  include(CheckCXXSourceRuns)
  set(CMAKE_REQUIRED_INCLUDES ${SQLite3_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_LIBRARIES ${SQLite3_LIBRARIES})
  check_cxx_source_runs([[
#include <sqlite3.h>
static int rows;
static int count(void*, int, char**, char**) { return ++rows, 0; }
int main(void) {
  sqlite3* db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 1;
  if (sqlite3_exec(db, "SELECT value FROM json_each('[1,2]')", count, 0, 0) != SQLITE_OK) return 2;
  sqlite3_close(db);
  return rows == 2 ? 0 : 3;
}]] TUNE_SQLITE_JSON_EACH_WORKS)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_LIBRARIES)
endif()
if(NOT TUNE_SQLITE_JSON_EACH_WORKS)
  message(FATAL_ERROR "SQLite ${SQLite3_VERSION} (${SQLite3_LIBRARIES}) has no json_each: the "
                      "SQLite storage needs SQLite's JSON functions (built in since 3.38; before, "
                      "SQLite built with SQLITE_ENABLE_JSON1, as Debian's and Ubuntu's are)")
endif()
if(TUNE_WITH_POSTGRES)
  find_package(PostgreSQL)  # libpq for tune_postgres; without it the backend says it is missing
  if(NOT PostgreSQL_FOUND)
    message(WARNING "libpq not found (Debian: libpq-dev): building tune without the PostgreSQL "
                    "storage; postgresql:// URLs will report that")
  endif()
endif()
if(TUNE_BUILD_TESTS)
  tune_dependency(GTest)
endif()

# LibTorch (optional; Debian: libtorch-dev, installed by scripts/install-deps.sh): the trainer of
# the 'train' objective. Without it tune builds and tests everything else, and says so here.
set(TUNE_TORCH_PYTHON "" CACHE FILEPATH
    "A Python whose pip or conda torch is the LibTorch to build against, read from its include and library directories without its CMake package or a CUDA compiler (empty: find_package(Torch))")
if(TUNE_WITH_TORCH AND TUNE_TORCH_PYTHON)
  include(${CMAKE_CURRENT_LIST_DIR}/TuneTorchFromPython.cmake)
elseif(TUNE_WITH_TORCH)
  # A CUDA LibTorch's CMake package (PyPI's wheel) compiles and runs a probe for the machine's
  # cards unless TORCH_CUDA_ARCH_LIST is set; the probe fails without a card, and where CMake does
  # not know the nvcc's flags (CMake 3.25 with CUDA 13). tune compiles no CUDA source, so the list
  # only has to be valid: kept in the cache, so that CMake re-running by itself (after a pull)
  # configures as the first run did.
  set(TUNE_TORCH_CUDA_ARCH_LIST "$ENV{TORCH_CUDA_ARCH_LIST}" CACHE STRING
      "TORCH_CUDA_ARCH_LIST for LibTorch's CMake package (empty: 7.5;8.0;8.6;8.9;9.0)")
  if(TUNE_TORCH_CUDA_ARCH_LIST STREQUAL "")
    set(ENV{TORCH_CUDA_ARCH_LIST} "7.5;8.0;8.6;8.9;9.0")
  else()
    set(ENV{TORCH_CUDA_ARCH_LIST} "${TUNE_TORCH_CUDA_ARCH_LIST}")
  endif()
  find_package(Torch QUIET)
endif()
if(TUNE_WITH_TORCH)
  if(Torch_FOUND)
    message(STATUS "LibTorch ${Torch_VERSION} found: building tune_torch (the 'train' objective)")
    # The C++ ABI: tune's other libraries (fmt, spdlog, ...) are the system's, built with the C++11
    # ABI (GCC's default since 5); torch's pip wheels used the old one before torch 2.7. A plugin
    # built with one ABI and linked with the other fails to link (std::string symbols) or worse.
    if(NOT DEFINED TUNE_TORCH_CXX11_ABI)
      set(TUNE_TORCH_CXX11_ABI 1)
      if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
        set(TUNE_TORCH_CXX11_ABI 0)
      endif()
    endif()
    if(NOT TUNE_TORCH_CXX11_ABI)
      message(FATAL_ERROR
        "LibTorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}) was built with the old C++ ABI "
        "(_GLIBCXX_USE_CXX11_ABI=0), as PyPI's torch wheels were before torch 2.7; tune links "
        "the system's fmt, spdlog and CLI11, which use the C++11 ABI, so the two cannot meet in "
        "one library. Use torch 2.7 or later (pip install 'torch>=2.7'), a conda torch, or "
        "LibTorch's cxx11-ABI download; or configure with -DTUNE_WITH_TORCH=OFF.")
    endif()
    # PyPI's torch wheels ship their own fmt (12.x) in torch/include, which LibTorch's include
    # directories put before the system's, while spdlog (Debian's 1.10) is built against the
    # system's fmt (9.x) and does not compile against 12. LibTorch uses its fmt only inside its
    # own libraries (c10's strong_type formatter aside, which is generic), so every unit of tune
    # reads the system's fmt first: a directory in the build tree holding a link to it, searched
    # before LibTorch's (a system directory itself cannot be put there).
    set(_torch_fmt "")
    foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
      if(EXISTS "${_dir}/fmt/format.h")
        set(_torch_fmt "${_dir}/fmt")
      endif()
    endforeach()
    get_target_property(_fmt_dirs fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
    if(TUNE_FMT_FETCHED)  # its include directory is a $<BUILD_INTERFACE:...> expression
      set(_fmt_dirs ${fmt_SOURCE_DIR}/include)
    endif()
    set(_system_fmt "")
    foreach(_dir IN LISTS _fmt_dirs)
      if(EXISTS "${_dir}/fmt/format.h")
        set(_system_fmt "${_dir}/fmt")
      endif()
    endforeach()
    if(_torch_fmt AND _system_fmt AND NOT _torch_fmt STREQUAL _system_fmt)
      set(TUNE_FMT_FIRST_DIR ${CMAKE_BINARY_DIR}/fmt-first)
      file(MAKE_DIRECTORY ${TUNE_FMT_FIRST_DIR})
      file(CREATE_LINK ${_system_fmt} ${TUNE_FMT_FIRST_DIR}/fmt SYMBOLIC)
      include_directories(BEFORE ${TUNE_FMT_FIRST_DIR})
      message(STATUS "LibTorch brings its own fmt (${_torch_fmt}); tune reads ${_system_fmt} "
                     "first (${TUNE_FMT_FIRST_DIR})")
    endif()
    # A PyPI wheel's CUDA libraries are its sibling packages (site-packages/nvidia/*/lib), found
    # by libtorch_cuda's own RPATH; the CUDA Toolkit on the machine may be an older one (its
    # NCCL lacks symbols libtorch_cuda needs). The linker looks there first, and tune's own
    # CUDA runtime (CUDA::cudart) is the wheel's, so that one runtime of one version is loaded.
    get_filename_component(_torch_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
    file(GLOB _wheel_cuda_dirs LIST_DIRECTORIES true "${_torch_site}/nvidia/*/lib")
    if(_wheel_cuda_dirs)
      foreach(_dir IN LISTS _wheel_cuda_dirs)
        add_link_options("LINKER:-rpath-link,${_dir}")
      endforeach()
      find_library(TUNE_WHEEL_CUDART NAMES libcudart.so.13 libcudart.so.12 PATHS ${_wheel_cuda_dirs}
                   NO_DEFAULT_PATH)
      if(TARGET CUDA::cudart AND TUNE_WHEEL_CUDART)
        set_property(TARGET CUDA::cudart PROPERTY IMPORTED_LOCATION ${TUNE_WHEEL_CUDART})
      endif()
      message(STATUS "LibTorch is a PyPI wheel: its CUDA libraries are in ${_torch_site}/nvidia "
                     "(CUDA runtime: ${TUNE_WHEEL_CUDART})")
    endif()
  else()
    message(WARNING "LibTorch NOT found: building tune WITHOUT the 'train' objective and its "
                    "tests. Install libtorch-dev (scripts/install-deps.sh) or point Torch_DIR "
                    "at a LibTorch's share/cmake/Torch, then reconfigure.")
    set(TUNE_WITH_TORCH OFF)
  endif()
endif()

# libcurl (Debian and Ubuntu: libcurl4-openssl-dev): MLflow's REST API for the tracking of
# studies (src/tracking/curl_http.cpp). Optional: without it MLflow addresses are refused, saying
# so.
find_package(CURL)
if(NOT CURL_FOUND)
  message(WARNING "libcurl not found (Debian/Ubuntu: libcurl4-openssl-dev): building tune without "
                  "MLflow tracking; configs and tune export that name an MLflow server will say so")
endif()

# minizip (Debian and Ubuntu: libminizip-dev, zlib's contrib) reads the zip archive torch.save
# writes (pytorch_model.bin, src/checkpoints/pytorch_bin.cpp). SentencePiece (libsentencepiece-dev)
# reads DeBERTa's spm.model and XLM-RoBERTa's sentencepiece.bpe.model (src/tokenizers/spm_shim/).
# With TUNE_FETCH_DEPS, or where one is missing, both are built from pinned sources
# (cmake/TuneFetchNative.cmake). The tokenizers' Unicode data is tune's own
# (src/tokenizers/unicode_tables.cpp): no ICU.
find_path(MINIZIP_INCLUDE_DIR unzip.h PATH_SUFFIXES minizip)
find_library(MINIZIP_LIBRARY minizip)
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(SENTENCEPIECE_LIBRARY sentencepiece)
add_library(tune_minizip INTERFACE)
add_library(tune_sentencepiece INTERFACE)
include(${CMAKE_CURRENT_LIST_DIR}/TuneFetchNative.cmake)
if(TUNE_FETCH_DEPS OR NOT MINIZIP_INCLUDE_DIR OR NOT MINIZIP_LIBRARY)
  enable_language(C)
  tune_fetch_minizip()
else()
  target_include_directories(tune_minizip SYSTEM INTERFACE ${MINIZIP_INCLUDE_DIR})
  target_link_libraries(tune_minizip INTERFACE ${MINIZIP_LIBRARY})
endif()
if(TUNE_FETCH_DEPS OR NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY)
  tune_fetch_sentencepiece()
else()
  target_include_directories(tune_sentencepiece SYSTEM INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(tune_sentencepiece INTERFACE ${SENTENCEPIECE_LIBRARY})
endif()
