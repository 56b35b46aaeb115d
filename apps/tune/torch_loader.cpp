#include "torch_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tune::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibrary = "libtune_torch.so";

std::vector<fs::path> Candidates() {
  if (const char* env = std::getenv("TUNE_TORCH_LIBRARY"); env != nullptr && *env != '\0') {
    return {fs::path(env)};
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {fs::path(kLibrary)};
  const fs::path dir = exe.parent_path();
  return {dir / kLibrary, dir.parent_path() / "lib" / "tune" / kLibrary};
}

struct Plugin {
  decltype(&tune_torch_plugin_abi) abi = nullptr;
  decltype(&tune_torch_new_trainer) new_trainer = nullptr;
  decltype(&tune_torch_version) version = nullptr;
};

// Loaded once per process and never unloaded (LibTorch does not support unloading).
Result<Plugin> Load() {
  static Result<Plugin> loaded = []() -> Result<Plugin> {
    const std::vector<fs::path> candidates = Candidates();
    std::string looked;
    for (const fs::path& path : candidates) {
      looked += (looked.empty() ? "" : ", ") + path.string();
      std::error_code ec;
      if (!fs::exists(path, ec)) continue;
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* err = dlerror();
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("cannot load the LibTorch trainer {}: {} (is LibTorch "
                                  "installed? scripts/install-deps.sh installs Debian's "
                                  "libtorch-dev)",
                                  path.string(), err != nullptr ? err : "unknown error"));
      }
      Plugin p;
      p.abi = reinterpret_cast<decltype(p.abi)>(dlsym(handle, "tune_torch_plugin_abi"));
      p.new_trainer =
          reinterpret_cast<decltype(p.new_trainer)>(dlsym(handle, "tune_torch_new_trainer"));
      p.version = reinterpret_cast<decltype(p.version)>(dlsym(handle, "tune_torch_version"));
      if (p.abi == nullptr || p.new_trainer == nullptr || p.version == nullptr ||
          p.abi() != kTorchPluginAbi) {
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("{} is not the LibTorch trainer of this tune build (stale or "
                                  "foreign library); rebuild tune, or point "
                                  "TUNE_TORCH_LIBRARY at the right libtune_torch.so",
                                  path.string()));
      }
      std::string version;
      p.version(&version);
      spdlog::debug("Loaded the LibTorch trainer {} (LibTorch {})", path.string(), version);
      return p;
    }
#ifdef TUNE_WITH_TORCH
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("the LibTorch trainer {} is missing (looked in: {}); rebuild tune "
                              "(cmake --build build) or set TUNE_TORCH_LIBRARY to its path",
                              kLibrary, looked));
#else
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("this tune was built without LibTorch, so it cannot run the "
                              "'train' objective (and found no {} in: {}); install LibTorch "
                              "(scripts/install-deps.sh installs Debian's libtorch-dev) and "
                              "rebuild",
                              kLibrary, looked));
#endif
  }();
  return loaded;
}

}  // namespace

Result<std::unique_ptr<Trainer>> LoadTorchTrainer(const TorchTrainerOptions& options) {
  auto plugin = Load();
  if (!plugin.ok()) return plugin.status();
  Status status;
  Trainer* trainer = plugin->new_trainer(&options, &status);
  if (trainer == nullptr) return status;
  return std::unique_ptr<Trainer>(trainer);
}

}  // namespace tune::app
