// tune's CUDA memory backend [tune_torch]: the caching allocator's statistics, emptyCache,
// peak resets and the memory-fraction cap, plus cudaMemGetInfo. Compiled with CUDA only when
// LibTorch has CUDA (TUNE_WITH_CUDA); otherwise every call reports that CUDA is not compiled in.
// No LibTorch or CUDA types here. APIs per LibTorch version: docs/memory.md#cuda-allocator-calls.
#pragma once

#include <cstdint>
#include <string>

#include "tune/status.h"

namespace tune::cuda_memory {

struct Stats {
  int64_t allocated = 0;       // allocated_bytes.current (AGGREGATE)
  int64_t allocated_peak = 0;  // allocated_bytes.peak since the last ResetPeak
  int64_t reserved = 0;        // reserved_bytes.current
  int64_t reserved_peak = 0;
  int64_t free = 0;   // cudaMemGetInfo: free on the device (every process counts)
  int64_t total = 0;  // cudaMemGetInfo: the device's memory
};

// Whether this build has the CUDA backend.
bool Compiled();
// Once per process, before CUDA allocates: unless PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF
// is set, turns on the caching allocator's expandable segments (LibTorch >= 2.1): large blocks
// are mapped into one growing segment instead of a cudaMalloc'ed segment per request, so memory
// freed at one shape serves the next and reserved memory stays close to allocated memory
// (docs/memory.md#expandable-segments). Returns the setting in force ("": LibTorch's defaults).
std::string ConfigureAllocator();
// Why the CUDA runtime finds no device here, in its words (cudaGetDeviceCount's error: "no
// CUDA-capable device is detected", "found no NVIDIA driver on your system", ...); "" when it
// finds one, or without the backend.
std::string NoDeviceReason();
// FailedPrecondition without the backend or when CUDA fails.
Result<Stats> GetStats(int device);
// Returns every unused cached block to the driver (after an OOM and between trials).
void EmptyCache();
// Frees the cuBLAS and cuBLASLt workspaces LibTorch 2.x keeps allocated in the caching allocator
// for the process's life (LibTorch takes new ones at the next matrix product); EmptyCache does
// this too. Nothing with LibTorch 1.x.
void ReleaseWorkspaces();
void ResetPeak(int device);
// Caps the caching allocator at `bytes` of the device (setMemoryFraction(bytes / total)); a cap
// of the whole card or more removes it. The OOM message then says "... allowed;".
Status SetDeviceMemory(int device, int64_t bytes);

}  // namespace tune::cuda_memory
