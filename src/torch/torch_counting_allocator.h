// A byte-counting CPU allocator for LibTorch [tune_torch, private]: measures the live and peak
// bytes of every CPU tensor and can enforce a budget by throwing a real c10::OutOfMemoryError, so
// that the out-of-memory paths of training run deterministically on a machine without a GPU
// (docs/memory.md#the-counting-cpu-allocator).
//
// Installed process-wide with c10::SetCPUAllocator (priority 100). Tensors allocated before the
// installation keep their own deleter and are not counted. No LibTorch types here.
//
// Thread safety: Install once at start-up, before other threads use LibTorch. The other functions
// may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>

namespace tune {

struct CpuMemoryStats {
  int64_t live_bytes = 0;                // bytes held by live CPU tensors now
  int64_t peak_bytes = 0;                // the largest live_bytes since the last reset
  int64_t allocations = 0;               // allocations so far
  int64_t oom_count = 0;                 // allocations refused by the device_memory limit
  std::optional<int64_t> device_memory;  // the limit (SetCpuDeviceMemory); unset: none
};

// Makes the counting allocator LibTorch's CPU allocator (later calls do nothing).
void InstallCountingCpuAllocator();
bool CountingCpuAllocatorInstalled();
CpuMemoryStats GetCpuMemoryStats();
// An allocation that would take live_bytes above `bytes` throws c10::OutOfMemoryError
// ("CPU out of memory (tune memory budget): ..."): the device_memory of a simulated card.
// nullopt removes the limit.
void SetCpuDeviceMemory(std::optional<int64_t> bytes);
// Sets peak_bytes to live_bytes.
void ResetCpuPeakMemory();

}  // namespace tune
