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
if(TUNE_WITH_TORCH)
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
  if(Torch_FOUND)
    message(STATUS "LibTorch ${Torch_VERSION} found: building tune_torch (the 'train' objective)")
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

# The tokenizers (tune_train): ICU's Unicode data (Debian: libicu-dev) for BERT's BasicTokenizer
# and GPT-2's pre-tokenizer, and SentencePiece (Debian: libsentencepiece-dev) for DeBERTa's
# spm.model and XLM-RoBERTa's sentencepiece.bpe.model.
find_package(ICU REQUIRED COMPONENTS uc)
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(SENTENCEPIECE_LIBRARY sentencepiece)
if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY)
  message(FATAL_ERROR "SentencePiece not found (Debian: libsentencepiece-dev; "
                      "scripts/install-deps.sh installs it)")
endif()
# libcurl (Debian: libcurl4-openssl-dev): MLflow's REST API for the tracking of studies
# (src/tracking/curl_http.cpp).
find_package(CURL REQUIRED)

# minizip (Debian: libminizip-dev, zlib's contrib) reads the zip archive torch.save writes
# (pytorch_model.bin, src/checkpoints/pytorch_bin.cpp).
find_path(MINIZIP_INCLUDE_DIR unzip.h PATH_SUFFIXES minizip)
find_library(MINIZIP_LIBRARY minizip)
if(NOT MINIZIP_INCLUDE_DIR OR NOT MINIZIP_LIBRARY)
  message(FATAL_ERROR "minizip not found (Debian: libminizip-dev; "
                      "scripts/install-deps.sh installs it)")
endif()
add_library(tune_minizip INTERFACE)
target_include_directories(tune_minizip SYSTEM INTERFACE ${MINIZIP_INCLUDE_DIR})
target_link_libraries(tune_minizip INTERFACE ${MINIZIP_LIBRARY})

add_library(tune_sentencepiece INTERFACE)
target_include_directories(tune_sentencepiece SYSTEM INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
target_link_libraries(tune_sentencepiece INTERFACE ${SENTENCEPIECE_LIBRARY})
