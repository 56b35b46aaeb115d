# zlib + minizip and SentencePiece from pinned sources (FetchContent), for TUNE_FETCH_DEPS or
# where the system lacks them (no root): static libraries with position-independent code, linked
# into libtune_train.so (minizip) and the libtune_spm.so shim (SentencePiece) and exported from
# neither. FETCHCONTENT_SOURCE_DIR_ZLIB / _SENTENCEPIECE point one at a local copy of the same
# release instead of downloading it. Only CMake 3.22 features.
include(FetchContent)
if(POLICY CMP0135)
  cmake_policy(SET CMP0135 NEW)
endif()

# zlib 1.3.1's release archive (its contrib/minizip is the minizip 1.1 Debian packages).
FetchContent_Declare(zlib
  URL https://github.com/madler/zlib/releases/download/v1.3.1/zlib-1.3.1.tar.gz
  URL_HASH SHA256=9a93b2b7dfdac77ceba5a558a580e74667dd6fede4585b91eefb60f03b72df23)
# SentencePiece 0.1.99's source distribution on PyPI, which carries the C++ library whole
# (sentencepiece/: src/, third_party/protobuf-lite), as the GitHub release does.
FetchContent_Declare(sentencepiece
  URL https://files.pythonhosted.org/packages/source/s/sentencepiece/sentencepiece-0.1.99.tar.gz
  URL_HASH SHA256=189c48f5cb2949288f97ccdb97f0473098d9c3dcf5a3d99d4eabe719ec27297f)


# tune_minizip (an INTERFACE target made by the caller) gets minizip's unzip over zlib.
# The caller enables C first (enable_language works in file scope only).
function(tune_fetch_minizip)
  _tune_populate(zlib)  # cmake/TuneFetchDeps.cmake
  set(_z ${zlib_SOURCE_DIR})
  file(GLOB _zlib_sources ${_z}/*.c)
  add_library(tune_zlib STATIC ${_zlib_sources} ${_z}/contrib/minizip/ioapi.c
                               ${_z}/contrib/minizip/unzip.c)
  target_include_directories(tune_zlib SYSTEM PUBLIC ${_z} ${_z}/contrib/minizip)
  # Large-file offsets as Debian builds it; no warnings from third-party C.
  target_compile_definitions(tune_zlib PRIVATE _LARGEFILE64_SOURCE=1 HAVE_UNISTD_H NOCRYPT)
  target_compile_options(tune_zlib PRIVATE -w)
  set_target_properties(tune_zlib PROPERTIES C_VISIBILITY_PRESET hidden)
  target_link_libraries(tune_minizip INTERFACE tune_zlib)
  # Not exported from libtune_train.so: no other library's zlib calls land in this copy.
  target_link_options(tune_minizip INTERFACE "LINKER:--exclude-libs,libtune_zlib.a")
  message(STATUS "tune: zlib 1.3.1 and its minizip built from ${_tune_origin} (${_z})")
endfunction()

# tune_sentencepiece (an INTERFACE target made by the caller) gets SentencePiece's encoder (its
# library without the trainer) with its own protobuf-lite.
function(tune_fetch_sentencepiece)
  _tune_populate(sentencepiece)
  set(_s ${sentencepiece_SOURCE_DIR}/sentencepiece)
  if(NOT EXISTS ${_s}/src/sentencepiece_processor.cc)
    message(FATAL_ERROR "SentencePiece's sources are not in ${_s} (the source distribution's "
                        "sentencepiece/ directory: src/, third_party/)")
  endif()
  file(GLOB _protobuf_lite ${_s}/third_party/protobuf-lite/*.cc)
  set(_sources ${_protobuf_lite} ${_s}/third_party/absl/flags/flag.cc
               ${_s}/src/builtin_pb/sentencepiece.pb.cc
               ${_s}/src/builtin_pb/sentencepiece_model.pb.cc)
  foreach(_f bpe_model char_model error filesystem model_factory model_interface normalizer
             sentencepiece_processor unigram_model util word_model)
    list(APPEND _sources ${_s}/src/${_f}.cc)
  endforeach()
  add_library(tune_sentencepiece_static STATIC ${_sources})
  set(PROJECT_NAME sentencepiece)
  set(PROJECT_VERSION 0.1.99)
  configure_file(${_s}/config.h.in ${CMAKE_CURRENT_BINARY_DIR}/sentencepiece/config.h)
  target_include_directories(tune_sentencepiece_static
    SYSTEM PUBLIC ${_s}/src
    PRIVATE ${_s} ${_s}/third_party/protobuf-lite ${_s}/src/builtin_pb ${_s}/third_party
            ${CMAKE_CURRENT_BINARY_DIR}/sentencepiece)
  target_compile_definitions(tune_sentencepiece_static PRIVATE HAVE_PTHREAD=1
                             _USE_INTERNAL_STRING_VIEW)
  target_compile_options(tune_sentencepiece_static PRIVATE -w)
  target_link_libraries(tune_sentencepiece_static PRIVATE Threads::Threads)
  # C++17, as its own build: C++20 changes u8"" literals to char8_t.
  set_target_properties(tune_sentencepiece_static PROPERTIES CXX_STANDARD 17 CXX_VISIBILITY_PRESET hidden
                                                             VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(tune_sentencepiece INTERFACE tune_sentencepiece_static)
  # Its protobuf-lite stays inside libtune_spm.so, as the shim's RTLD_DEEPBIND intends.
  target_link_options(tune_sentencepiece INTERFACE "LINKER:--exclude-libs,ALL")
  message(STATUS "tune: SentencePiece 0.1.99 built from ${_tune_origin} (${_s})")
endfunction()
