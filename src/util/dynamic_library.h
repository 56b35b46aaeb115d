// DynamicLibrary: a shared library opened at run time (dlopen), its symbols, and errors that name
// the file. The three libraries tune opens this way: the LibTorch trainer (libtune_torch.so, so
// that commands without training do not pay LibTorch's start-up), the SentencePiece shim
// (libtune_spm.so, kept out of LibTorch's symbol scope) and NVML (libnvidia-ml.so.1, present only
// where an NVIDIA driver is). [tune_core, private]
#pragma once

#include <string>
#include <vector>

#include "tune/status.h"

namespace tune {

class DynamicLibrary {
 public:
  // Opens `path` with RTLD_NOW | RTLD_LOCAL | `extra_flags` (e.g. RTLD_DEEPBIND).
  // FailedPrecondition "PATH: <dlerror>" when it cannot be loaded.
  static Result<DynamicLibrary> Open(const std::string& path, int extra_flags = 0);
  // The first of `candidates` that exists, opened as Open does; NotFound "looked in: A, B" when
  // none exists.
  static Result<DynamicLibrary> OpenFirst(const std::vector<std::string>& candidates,
                                          int extra_flags = 0);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  // Closes the library unless Keep() was called.
  ~DynamicLibrary();

  // The symbol `name` as a pointer of type F; nullptr when the library lacks it.
  template <typename F>
  F Symbol(const char* name) const {
    return reinterpret_cast<F>(RawSymbol(name));
  }
  // Leaves the library loaded for the rest of the process (LibTorch cannot be unloaded, and the
  // shim's code is referenced by tokenizers that live as long as the process).
  void Keep() { keep_ = true; }
  const std::string& path() const { return path_; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* RawSymbol(const char* name) const;

  void* handle_ = nullptr;
  std::string path_;
  bool keep_ = false;
};

}  // namespace tune
