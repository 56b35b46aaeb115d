#include "torch_cuda_memory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>

#include "torch/torch_version.h"

#if defined(TUNE_WITH_CUDA) && TUNE_TORCH_AT_LEAST(2, 0)
#include <ATen/cuda/CUDAContextLight.h>  // at::cuda::clearCublasWorkspaces
#endif

#if defined(TUNE_WITH_CUDA) && TUNE_TORCH_AT_LEAST(2, 1) && \
    __has_include(<c10/cuda/CUDAAllocatorConfig.h>)
#include <c10/cuda/CUDAAllocatorConfig.h>  // setAllocatorSettings
#define TUNE_EXPANDABLE_SEGMENTS 1
#endif

#ifdef TUNE_WITH_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace tune::cuda_memory {

#ifdef TUNE_WITH_CUDA

namespace {
// StatType::AGGREGATE; an index, because the enum moved between LibTorch versions.
constexpr size_t kAggregate = 0;

// LibTorch sets the caching allocator up for the process's devices when it first initialises
// CUDA (lazily, at the first CUDA tensor); before that LibTorch 2.x answers every statistics call
// with "Invalid device argument". An empty tensor initialises CUDA without allocating (the name
// of the initialising call differs between versions: lazyInitCUDA, lazyInitDevice).
Status InitializeCuda(int device) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [device] {
    try {
      const c10::Device d =
          device >= 0 ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device))
                      : c10::Device(c10::DeviceType::CUDA);
      (void)at::empty({0}, at::TensorOptions().device(d));
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    }
  });
  if (error.empty()) return Status::Ok();
  return FailedPreconditionError(fmt::format("initialising CUDA: {}", error));
}
}  // namespace

bool Compiled() { return true; }

std::string ConfigureAllocator() {
  static std::once_flag once;
  static std::string setting;
  std::call_once(once, [] {
    for (const char* name : {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"}) {
      if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
        setting = fmt::format("{}={} (from the environment)", name, v);
        return;
      }
    }
#ifdef TUNE_EXPANDABLE_SEGMENTS
    try {
      c10::cuda::CUDACachingAllocator::setAllocatorSettings("expandable_segments:True");
      setting = "expandable_segments:True";
    } catch (const c10::Error& e) {
      spdlog::warn("CUDA caching allocator: expandable segments not set: {}",
                   e.what_without_backtrace());
    }
#endif
  });
  return setting;
}

std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
  }
  return count > 0 ? "" : "no CUDA device";
}

Result<Stats> GetStats(int device) {
  TUNE_RETURN_IF_ERROR(InitializeCuda(device));
  Stats s;
  size_t free = 0, total = 0;
  cudaError_t err = cudaSuccess;
  try {
    const auto d = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    s.allocated = d.allocated_bytes[kAggregate].current;
    s.allocated_peak = d.allocated_bytes[kAggregate].peak;
    s.reserved = d.reserved_bytes[kAggregate].current;
    s.reserved_peak = d.reserved_bytes[kAggregate].peak;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    err = cudaMemGetInfo(&free, &total);
  } catch (const c10::Error& e) {
    return FailedPreconditionError(fmt::format("CUDA allocator statistics of device {}: {}", device,
                                               e.what_without_backtrace()));
  }
  if (err != cudaSuccess) {
    return FailedPreconditionError(
        fmt::format("cudaMemGetInfo on device {}: {}", device, cudaGetErrorString(err)));
  }
  s.free = static_cast<int64_t>(free);
  s.total = static_cast<int64_t>(total);
  return s;
}

void ReleaseWorkspaces() {
#if TUNE_TORCH_AT_LEAST(2, 0)
  // LibTorch 2.x takes each stream's cuBLAS and cuBLASLt workspaces from the caching allocator
  // and keeps them for the process's life (65 MiB on an H200 with 2.11), which would leave every
  // finished trial looking as if it leaked them.
  if (!InitializeCuda(-1).ok()) return;
  try {
    at::cuda::clearCublasWorkspaces();
  } catch (const c10::Error&) {  // none to free
  }
#endif
}

void EmptyCache() {
  if (!InitializeCuda(-1).ok()) return;
  ReleaseWorkspaces();
  try {
    c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (const c10::Error&) {  // nothing cached to return
  }
}

void ResetPeak(int device) {
  if (!InitializeCuda(device).ok()) return;
  try {
    c10::cuda::CUDACachingAllocator::resetPeakStats(device);
  } catch (const c10::Error&) {  // GetStats reports the same device error
  }
}

Status SetDeviceMemory(int device, int64_t bytes) {
  TUNE_ASSIGN_OR_RETURN(Stats s, GetStats(device));  // initialises CUDA
  const double fraction = bytes <= 0 || bytes >= s.total
                              ? 1.0
                              : static_cast<double>(bytes) / static_cast<double>(s.total);
  try {
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device);
  } catch (const c10::Error& e) {
    return FailedPreconditionError(
        fmt::format("setMemoryFraction({}, {}): {}", fraction, device, e.what_without_backtrace()));
  }
  return Status::Ok();
}

#else

bool Compiled() { return false; }

std::string ConfigureAllocator() { return ""; }

std::string NoDeviceReason() { return ""; }

Result<Stats> GetStats(int /*device*/) {
  return FailedPreconditionError("tune was built without the CUDA memory backend");
}

void EmptyCache() {}

void ReleaseWorkspaces() {}

void ResetPeak(int /*device*/) {}

Status SetDeviceMemory(int /*device*/, int64_t /*bytes*/) {
  return FailedPreconditionError("tune was built without the CUDA memory backend");
}

#endif

}  // namespace tune::cuda_memory
