// GpuProcessMemory: the device memory that given processes use on NVIDIA GPUs, as the driver
// reports it (NVML's per-process "used GPU memory", what nvidia-smi shows). NVML
// (libnvidia-ml.so.1, installed with the driver) is opened with dlopen when present, so tune
// needs no CUDA toolkit to build or run; without it Open() returns null and callers fall back to
// what they can measure on the host. The command objective samples it while a program runs, to
// record the program's device peak (docs/config.md, "The memory guard for a command"), and
// `--jobs` reads the card's utilisation from it for its status line.
//
// Thread safety: UsedBy and UsedByGroup may be called from one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tune {

class GpuProcessMemory {
 public:
  // The library at `library` (default: $TUNE_NVML_LIBRARY, else "libnvidia-ml.so.1"), initialised;
  // null when it cannot be loaded or initialised (no driver, no GPU), with the reason in `why`.
  static std::shared_ptr<GpuProcessMemory> Open(std::string* why = nullptr,
                                                const std::string& library = "");
  ~GpuProcessMemory();
  GpuProcessMemory(const GpuProcessMemory&) = delete;
  GpuProcessMemory& operator=(const GpuProcessMemory&) = delete;

  // Bytes the processes `pids` use on all GPUs together (0 when none runs on a GPU); nullopt
  // when the driver cannot say.
  std::optional<int64_t> UsedBy(const std::vector<pid_t>& pids) const;
  // The same for the processes of process group `pgid` (a trial's program and its children).
  std::optional<int64_t> UsedByGroup(pid_t pgid) const;
  // (pid, bytes) of every process with memory on device `index`: compute and graphics processes
  // (a desktop's), each once; nullopt when the driver cannot say. The pids are the driver's: in a
  // container without the host's PID namespace they name no process here.
  std::optional<std::vector<std::pair<pid_t, int64_t>>> Processes(unsigned int index) const;
  // The total memory of device `index` (NVML's nvmlDeviceGetMemoryInfo, what nvidia-smi shows
  // as the card's memory); nullopt when there is no such device or the driver cannot say.
  std::optional<int64_t> TotalMemory(unsigned int index = 0) const;
  // The CUDA compute capability (major, minor) of device `index` (8.0: A100, 9.0: H100/H200);
  // nullopt when the driver cannot say.
  std::optional<std::pair<int, int>> ComputeCapability(unsigned int index = 0) const;
  // The product name of device `index` ("Tesla T4", "NVIDIA H200"); nullopt when the driver
  // cannot say.
  std::optional<std::string> Name(unsigned int index = 0) const;
  // The share of the last sample period (1/6 s to 1 s, by product) in which one or more kernels
  // ran on device `index`, in [0, 1] (nvmlDeviceGetUtilizationRates' `gpu`, nvidia-smi's
  // GPU-Util): a time share, not how much of the card they used. nullopt when the driver cannot
  // say.
  std::optional<double> Utilization(unsigned int index = 0) const;
  // How many devices the driver sees (all of the machine's: NVML ignores CUDA_VISIBLE_DEVICES).
  std::optional<unsigned int> DeviceCount() const;

  struct Api;  // the NVML entry points (gpu_process_memory.cpp)

 private:
  explicit GpuProcessMemory(std::unique_ptr<Api> api);
  std::optional<int64_t> Used(const std::function<bool(pid_t)>& counted) const;
  std::optional<void*> Device(unsigned int index) const;  // NVML's handle of device `index`
  std::unique_ptr<Api> api_;
};

// NVML's index of CUDA device `cuda_index` as this process numbers it: the entry at that position
// of CUDA_VISIBLE_DEVICES when it lists device indices, else the index itself; nullopt when the
// list names devices otherwise (UUIDs, MIG instances) or has no such entry. (NVML ignores
// CUDA_VISIBLE_DEVICES; with several cards, CUDA_DEVICE_ORDER=PCI_BUS_ID makes both number the
// rest alike.)
std::optional<unsigned int> NvmlIndexOf(int cuda_index, const char* visible_devices);

// One CUDA device ("cuda" or "cuda:N"; nothing for "cpu") as the driver (NVML) sees it, opened
// on the first reading: for status lines and the trainer's context measurement, so never an
// error, nullopt when unknown.
class DeviceNvml {
 public:
  explicit DeviceNvml(const std::string& device);
  std::optional<double> Utilization() const;
  // The device's compute capability (GpuProcessMemory::ComputeCapability) and its major number.
  std::optional<std::pair<int, int>> ComputeCapability() const;
  std::optional<int> ComputeMajor() const;
  // The device's product name (GpuProcessMemory::Name).
  std::optional<std::string> Name() const;
  // The device memory this process uses (GpuProcessMemory::UsedBy).
  std::optional<int64_t> UsedByThisProcess() const;
  // The device's total memory (GpuProcessMemory::TotalMemory).
  std::optional<int64_t> TotalMemory() const;

 private:
  const GpuProcessMemory* Nvml() const;  // null: not a CUDA device, or no NVML
  std::optional<unsigned int> index_;    // NVML's index; unset: not a CUDA device we can name
  mutable bool opened_ = false;
  mutable std::shared_ptr<GpuProcessMemory> nvml_;
};

// Whether process `pid` is alive (not a zombie) and belongs to process group `pgid` (read from
// /proc/PID/stat).
bool InProcessGroup(pid_t pid, pid_t pgid);
// The parent of process `pid` (0 for the first process of a PID namespace); nullopt when there is
// no such process here.
std::optional<pid_t> ParentProcess(pid_t pid);

}  // namespace tune
