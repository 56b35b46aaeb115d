#include "torch_loader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "app.h"
#include "util/dynamic_library.h"

namespace tune::app {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibrary = "libtune_torch.so";

std::vector<std::string> Candidates() {
  if (const char* env = std::getenv("TUNE_TORCH_LIBRARY"); env != nullptr && *env != '\0') {
    return {env};
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {kLibrary};
  const fs::path dir = exe.parent_path();
  return {(dir / kLibrary).string(), (dir.parent_path() / "lib" / "tune" / kLibrary).string()};
}

struct Plugin {
  decltype(&tune_torch_plugin_abi) abi = nullptr;
  decltype(&tune_torch_new_trainer) new_trainer = nullptr;
  decltype(&tune_torch_version) version = nullptr;
  decltype(&tune_torch_cuda_status) cuda_status = nullptr;
};

// The plugin's entry points, checked against this build's ABI; the library then stays loaded.
Result<Plugin> Bind(DynamicLibrary& lib) {
  Plugin p;
  p.abi = lib.Symbol<decltype(p.abi)>("tune_torch_plugin_abi");
  p.new_trainer = lib.Symbol<decltype(p.new_trainer)>("tune_torch_new_trainer");
  p.version = lib.Symbol<decltype(p.version)>("tune_torch_version");
  p.cuda_status = lib.Symbol<decltype(p.cuda_status)>("tune_torch_cuda_status");
  if (p.abi == nullptr || p.new_trainer == nullptr || p.version == nullptr ||
      p.cuda_status == nullptr || p.abi() != kTorchPluginAbi) {
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("{} is not the LibTorch trainer of this tune build (stale or "
                              "foreign library); rebuild tune, or point "
                              "TUNE_TORCH_LIBRARY at the right libtune_torch.so",
                              lib.path()));
  }
  std::string version;
  p.version(&version);
  spdlog::debug("Loaded the LibTorch trainer {} (LibTorch {})", lib.path(), version);
  lib.Keep();
  return p;
}

// Loaded once per process and never unloaded (LibTorch does not support unloading).
Result<Plugin> Load() {
  static Result<Plugin> loaded = []() -> Result<Plugin> {
    auto lib = DynamicLibrary::OpenFirst(Candidates());
    if (lib.ok()) return Bind(*lib);
    if (lib.status().code() != StatusCode::kNotFound) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("cannot load the LibTorch trainer {} (is LibTorch installed? "
                                "scripts/install-deps.sh installs Debian's libtorch-dev)",
                                lib.status().message()));
    }
#ifdef TUNE_WITH_TORCH
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("the LibTorch trainer {} is missing ({}); rebuild tune "
                              "(cmake --build build) or set TUNE_TORCH_LIBRARY to its path",
                              kLibrary, lib.status().message()));
#else
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("this tune was built without LibTorch, so it cannot run the "
                              "'train' objective (and found no {}, {}); install LibTorch "
                              "(scripts/install-deps.sh installs Debian's libtorch-dev) and "
                              "rebuild",
                              kLibrary, lib.status().message()));
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

Result<std::unique_ptr<Trainer>> LoadTrainer(const std::string& device, int64_t threads,
                                             std::optional<int64_t> device_memory,
                                             bool count_cpu_memory) {
  TorchTrainerOptions options;
  options.device = device;
  options.threads = threads;
  options.device_memory = device_memory;
  options.count_cpu_memory = count_cpu_memory;
  options.restarts = Restarts();
  return LoadTorchTrainer(options);
}

std::string TorchVersionText() {
  auto plugin = Load();
  if (!plugin.ok()) return "LibTorch: not available (" + plugin.status().message() + ")";
  std::string version, cuda;
  plugin->version(&version);
  plugin->cuda_status(&cuda);
  return fmt::format("LibTorch {}; {}", version, cuda);
}

bool TorchCudaUsable() {
  auto plugin = Load();
  if (!plugin.ok()) return false;
  std::string cuda;
  plugin->cuda_status(&cuda);
  return cuda.rfind(kCudaUsable, 0) == 0;
}

}  // namespace tune::app
