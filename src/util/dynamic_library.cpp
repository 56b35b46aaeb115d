#include "util/dynamic_library.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>
#include <utility>

namespace tune {

Result<DynamicLibrary> DynamicLibrary::Open(const std::string& path, int extra_flags) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | extra_flags);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status(StatusCode::kFailedPrecondition,
                  path + ": " + (err != nullptr ? err : "unknown dlopen error"));
  }
  return DynamicLibrary(handle, path);
}

Result<DynamicLibrary> DynamicLibrary::OpenFirst(const std::vector<std::string>& candidates,
                                                 int extra_flags) {
  std::string looked;
  for (const std::string& path : candidates) {
    looked += (looked.empty() ? "" : ", ") + path;
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return Open(path, extra_flags);
  }
  return NotFoundError("looked in: " + looked);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      keep_(other.keep_) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr && !keep_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    keep_ = other.keep_;
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr && !keep_) dlclose(handle_);
}

void* DynamicLibrary::RawSymbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

}  // namespace tune
