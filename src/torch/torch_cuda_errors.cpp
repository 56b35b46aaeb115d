// CUDA errors that poison the context, and the test hook that simulates one (torch_cuda_errors.h).
#include "torch/torch_cuda_errors.h"

#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string_view>

namespace tune {

bool IsStickyCudaError(const std::string& what) {
  // cudaErrorAssert, cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
  // cudaErrorIllegalInstruction, cudaErrorHardwareStackError, cudaErrorInvalidPc,
  // cudaErrorECCUncorrectable, cudaErrorLaunchTimeout: the "sticky" errors of the CUDA runtime's
  // documentation, as PyTorch words them ("CUDA error: <cudaGetErrorString>").
  static constexpr std::string_view kPatterns[] = {
      "device-side assert triggered",
      "an illegal memory access was encountered",
      "unspecified launch failure",
      "misaligned address",
      "an illegal instruction was encountered",
      "hardware stack error",
      "invalid program counter",
      "uncorrectable ECC error encountered",
      "the launch timed out and was terminated",
      "CUBLAS_STATUS_EXECUTION_FAILED",
  };
  for (std::string_view p : kPatterns) {
    if (what.find(p) != std::string::npos) return true;
  }
  return false;
}

StickyCudaErrorHook& StickyCudaErrorHook::Init(int restarts) {
  static StickyCudaErrorHook hook(restarts);
  return hook;
}

StickyCudaErrorHook::StickyCudaErrorHook(int restarts) {
  const char* spec = std::getenv("TUNE_TEST_STICKY_CUDA_ERROR");
  if (spec == nullptr || *spec == '\0') return;
  const std::string text(spec);
  const long processes = std::strtol(text.c_str(), nullptr, 10);
  armed_ = restarts < processes;
  late_ = text.find(":late") != std::string::npos;
  real_ = text.find(":real") != std::string::npos;
  if (armed_) {
    spdlog::warn(
        "TUNE_TEST_STICKY_CUDA_ERROR={}: this process's first run fails as a "
        "device-side assert would{}",
        text,
        late_   ? ", at its closing synchronisation"
        : real_ ? " (a real one on CUDA)"
                : "");
  }
}

void StickyCudaErrorHook::AtRunStart() {
  if (poisoned_ && !pending_) Fail("at the run's first CUDA call");
}

bool StickyCudaErrorHook::WantsRealError(int64_t step) {
  if (!armed_ || !real_ || step != 2) return false;
  armed_ = false;
  return true;
}

void StickyCudaErrorHook::AtStep(int64_t step) {
  if (!armed_ || real_ || step != 2) return;
  armed_ = false;
  poisoned_ = true;
  if (late_) {
    pending_ = true;  // reported at the next synchronising call, as CUDA does
    return;
  }
  Fail("at optimizer step 2");
}

void StickyCudaErrorHook::AtSync() {
  if (!pending_) return;
  pending_ = false;
  Fail("at the run's closing synchronisation");
}

void StickyCudaErrorHook::Fail(const char* where) {
  TORCH_CHECK(false,
              "CUDA error: device-side assert triggered\nCUDA kernel errors might be "
              "asynchronously reported at some other API call, so the stacktrace below might be "
              "incorrect. (simulated by TUNE_TEST_STICKY_CUDA_ERROR, ",
              where, ")");
  std::abort();  // not reached: TORCH_CHECK throws
}

}  // namespace tune
