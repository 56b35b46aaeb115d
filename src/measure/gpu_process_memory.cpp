// NVML through dlopen: the few entry points GpuProcessMemory needs, declared here with the C
// types of NVML's public header (nvml.h), so that building needs no CUDA toolkit.
#include "measure/gpu_process_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "util/device.h"
#include "util/dynamic_library.h"

namespace tune {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;

// nvmlProcessInfo_v1_t (nvmlDeviceGetComputeRunningProcesses) and nvmlProcessInfo_v2_t (its _v2
// and _v3 variants, with the MIG instance ids).
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(runtime/int): NVML's type
};
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(runtime/int)
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// nvmlMemory_t (nvmlDeviceGetMemoryInfo).
struct MemoryInfo {
  unsigned long long total;  // NOLINT(runtime/int): NVML's type
  unsigned long long free;   // NOLINT(runtime/int)
  unsigned long long used;   // NOLINT(runtime/int)
};

// nvmlUtilization_t (nvmlDeviceGetUtilizationRates): percentages of the last sample period.
struct UtilizationRates {
  unsigned int gpu;
  unsigned int memory;
};

// NVML reports this for a process whose usage it cannot see (no permission, or a MIG view).
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;  // NOLINT(runtime/int)

}  // namespace

struct GpuProcessMemory::Api {
  std::optional<DynamicLibrary> lib;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*device_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*device_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  // One of these, the newest the library has.
  nvmlReturn_t (*processes_v2)(nvmlDevice_t, unsigned int*, ProcessInfoV2*) = nullptr;
  nvmlReturn_t (*processes_v1)(nvmlDevice_t, unsigned int*, ProcessInfoV1*) = nullptr;
  // The same for graphics processes (the desktop, a browser): optional.
  nvmlReturn_t (*graphics_v2)(nvmlDevice_t, unsigned int*, ProcessInfoV2*) = nullptr;
  nvmlReturn_t (*graphics_v1)(nvmlDevice_t, unsigned int*, ProcessInfoV1*) = nullptr;
  nvmlReturn_t (*memory_info)(nvmlDevice_t, MemoryInfo*) = nullptr;        // optional
  nvmlReturn_t (*utilization)(nvmlDevice_t, UtilizationRates*) = nullptr;  // optional
  nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*) = nullptr;  // optional
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;       // optional

  ~Api() {
    if (shutdown != nullptr) shutdown();
  }

  // (pid, bytes) of the compute processes on one device.
  bool Processes(nvmlDevice_t device, std::vector<std::pair<pid_t, int64_t>>& out) const {
    return List(processes_v2, processes_v1, device, out);
  }
  // (pid, bytes) of the graphics processes on one device (none when NVML cannot list them).
  bool GraphicsProcesses(nvmlDevice_t device, std::vector<std::pair<pid_t, int64_t>>& out) const {
    if (graphics_v2 == nullptr && graphics_v1 == nullptr) return true;
    return List(graphics_v2, graphics_v1, device, out);
  }

  static bool List(nvmlReturn_t (*list_v2)(nvmlDevice_t, unsigned int*, ProcessInfoV2*),
                   nvmlReturn_t (*list_v1)(nvmlDevice_t, unsigned int*, ProcessInfoV1*),
                   nvmlDevice_t device, std::vector<std::pair<pid_t, int64_t>>& out) {
    const bool v2_list = list_v2 != nullptr;
    unsigned int n = 0;
    for (int attempt = 0; attempt < 4; ++attempt) {
      std::vector<ProcessInfoV2> v2(v2_list ? n : 0);
      std::vector<ProcessInfoV1> v1(v2_list ? 0 : n);
      unsigned int count = n;
      const nvmlReturn_t r =
          v2_list ? list_v2(device, &count, v2.data()) : list_v1(device, &count, v1.data());
      if (r == kNvmlInsufficientSize) {
        n = count + 8;  // processes may start between the two calls
        continue;
      }
      if (r != kNvmlSuccess) return false;
      for (unsigned int i = 0; i < count; ++i) {
        const unsigned int pid = v2_list ? v2[i].pid : v1[i].pid;
        const unsigned long long used =  // NOLINT(runtime/int)
            v2_list ? v2[i].used_gpu_memory : v1[i].used_gpu_memory;
        if (used != kNvmlValueNotAvailable) out.emplace_back(static_cast<pid_t>(pid), used);
      }
      return true;
    }
    return false;
  }
};

std::shared_ptr<GpuProcessMemory> GpuProcessMemory::Open(std::string* why,
                                                         const std::string& library) {
  std::string path = library;
  if (path.empty()) {
    const char* env = std::getenv("TUNE_NVML_LIBRARY");
    path = env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
  }
  auto fail = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return nullptr;
  };
  auto opened = DynamicLibrary::Open(path);
  if (!opened.ok()) return fail(opened.status().message());
  auto api = std::make_unique<Api>();
  const DynamicLibrary& lib = api->lib.emplace(std::move(opened).value());
  auto init = lib.Symbol<nvmlReturn_t (*)()>("nvmlInit_v2");
  api->device_count = lib.Symbol<decltype(api->device_count)>("nvmlDeviceGetCount_v2");
  api->device_handle = lib.Symbol<decltype(api->device_handle)>("nvmlDeviceGetHandleByIndex_v2");
  api->processes_v2 =
      lib.Symbol<decltype(api->processes_v2)>("nvmlDeviceGetComputeRunningProcesses_v3");
  if (api->processes_v2 == nullptr) {
    api->processes_v2 =
        lib.Symbol<decltype(api->processes_v2)>("nvmlDeviceGetComputeRunningProcesses_v2");
  }
  api->processes_v1 =
      lib.Symbol<decltype(api->processes_v1)>("nvmlDeviceGetComputeRunningProcesses");
  api->graphics_v2 =
      lib.Symbol<decltype(api->graphics_v2)>("nvmlDeviceGetGraphicsRunningProcesses_v3");
  if (api->graphics_v2 == nullptr) {
    api->graphics_v2 =
        lib.Symbol<decltype(api->graphics_v2)>("nvmlDeviceGetGraphicsRunningProcesses_v2");
  }
  if (api->graphics_v2 == nullptr) {
    api->graphics_v1 =
        lib.Symbol<decltype(api->graphics_v1)>("nvmlDeviceGetGraphicsRunningProcesses");
  }
  api->memory_info = lib.Symbol<decltype(api->memory_info)>("nvmlDeviceGetMemoryInfo");
  api->utilization = lib.Symbol<decltype(api->utilization)>("nvmlDeviceGetUtilizationRates");
  api->compute_capability =
      lib.Symbol<decltype(api->compute_capability)>("nvmlDeviceGetCudaComputeCapability");
  api->name = lib.Symbol<decltype(api->name)>("nvmlDeviceGetName");
  auto shutdown = lib.Symbol<nvmlReturn_t (*)()>("nvmlShutdown");
  if (init == nullptr || shutdown == nullptr || api->device_count == nullptr ||
      api->device_handle == nullptr ||
      (api->processes_v2 == nullptr && api->processes_v1 == nullptr)) {
    return fail(path + ": not NVML (an entry point is missing)");
  }
  if (const nvmlReturn_t r = init(); r != kNvmlSuccess) {
    return fail(path + ": nvmlInit failed with NVML error " + std::to_string(r));
  }
  api->shutdown = shutdown;
  return std::shared_ptr<GpuProcessMemory>(new GpuProcessMemory(std::move(api)));
}

GpuProcessMemory::GpuProcessMemory(std::unique_ptr<Api> api) : api_(std::move(api)) {}
GpuProcessMemory::~GpuProcessMemory() = default;

std::optional<int64_t> GpuProcessMemory::UsedBy(const std::vector<pid_t>& pids) const {
  return Used([&](pid_t pid) { return std::find(pids.begin(), pids.end(), pid) != pids.end(); });
}

std::optional<int64_t> GpuProcessMemory::UsedByGroup(pid_t pgid) const {
  return Used([pgid](pid_t pid) { return InProcessGroup(pid, pgid); });
}

std::optional<int64_t> GpuProcessMemory::Used(const std::function<bool(pid_t)>& counted) const {
  unsigned int devices = 0;
  if (api_->device_count(&devices) != kNvmlSuccess) return std::nullopt;
  int64_t total = 0;
  for (unsigned int d = 0; d < devices; ++d) {
    nvmlDevice_t device = nullptr;
    std::vector<std::pair<pid_t, int64_t>> procs;
    if (api_->device_handle(d, &device) != kNvmlSuccess || !api_->Processes(device, procs)) {
      return std::nullopt;
    }
    for (const auto& [pid, bytes] : procs) {
      if (counted(pid)) total += bytes;
    }
  }
  return total;
}

std::optional<void*> GpuProcessMemory::Device(unsigned int index) const {
  unsigned int devices = 0;
  nvmlDevice_t device = nullptr;
  if (api_->device_count(&devices) != kNvmlSuccess || index >= devices ||
      api_->device_handle(index, &device) != kNvmlSuccess) {
    return std::nullopt;
  }
  return device;
}

std::optional<std::vector<std::pair<pid_t, int64_t>>> GpuProcessMemory::Processes(
    unsigned int index) const {
  const std::optional<nvmlDevice_t> device = Device(index);
  std::vector<std::pair<pid_t, int64_t>> compute, graphics;
  if (!device || !api_->Processes(*device, compute) ||
      !api_->GraphicsProcesses(*device, graphics)) {
    return std::nullopt;
  }
  // A process with both a compute and a graphics context is listed twice with the same memory.
  for (const auto& [pid, bytes] : graphics) {
    auto same = std::find_if(compute.begin(), compute.end(),
                             [pid = pid](const auto& p) { return p.first == pid; });
    if (same == compute.end()) {
      compute.emplace_back(pid, bytes);
    } else {
      same->second = std::max(same->second, bytes);
    }
  }
  return compute;
}

std::optional<int64_t> GpuProcessMemory::TotalMemory(unsigned int index) const {
  const std::optional<nvmlDevice_t> device = Device(index);
  MemoryInfo info{};
  if (api_->memory_info == nullptr || !device ||
      api_->memory_info(*device, &info) != kNvmlSuccess) {
    return std::nullopt;
  }
  return static_cast<int64_t>(info.total);
}

std::optional<std::pair<int, int>> GpuProcessMemory::ComputeCapability(unsigned int index) const {
  const std::optional<nvmlDevice_t> device = Device(index);
  int major = 0, minor = 0;
  if (api_->compute_capability == nullptr || !device ||
      api_->compute_capability(*device, &major, &minor) != kNvmlSuccess) {
    return std::nullopt;
  }
  return std::make_pair(major, minor);
}

std::optional<std::string> GpuProcessMemory::Name(unsigned int index) const {
  const std::optional<nvmlDevice_t> device = Device(index);
  char name[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  if (api_->name == nullptr || !device || api_->name(*device, name, sizeof(name)) != kNvmlSuccess) {
    return std::nullopt;
  }
  name[sizeof(name) - 1] = '\0';
  return std::string(name);
}

std::optional<double> GpuProcessMemory::Utilization(unsigned int index) const {
  const std::optional<nvmlDevice_t> device = Device(index);
  UtilizationRates rates{};
  if (api_->utilization == nullptr || !device ||
      api_->utilization(*device, &rates) != kNvmlSuccess || rates.gpu > 100) {
    return std::nullopt;
  }
  return static_cast<double>(rates.gpu) / 100.0;
}

std::optional<unsigned int> GpuProcessMemory::DeviceCount() const {
  unsigned int devices = 0;
  if (api_->device_count(&devices) != kNvmlSuccess) return std::nullopt;
  return devices;
}

std::optional<unsigned int> NvmlIndexOf(int cuda_index, const char* visible_devices) {
  if (cuda_index < 0) return std::nullopt;
  if (visible_devices == nullptr) return static_cast<unsigned int>(cuda_index);
  std::istringstream list(visible_devices);
  std::string entry;
  for (int i = 0; std::getline(list, entry, ','); ++i) {
    std::erase_if(entry, [](unsigned char c) { return std::isspace(c) != 0; });
    if (entry.empty() || entry.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    if (i == cuda_index) return static_cast<unsigned int>(std::stoul(entry));
  }
  return std::nullopt;
}

DeviceNvml::DeviceNvml(const std::string& device) {
  const Result<Device> parsed = ParseDevice(device);
  if (parsed.ok() && parsed->is_cuda()) {
    index_ = NvmlIndexOf(parsed->index.value_or(0), std::getenv("CUDA_VISIBLE_DEVICES"));
  }
}

const GpuProcessMemory* DeviceNvml::Nvml() const {
  if (!index_) return nullptr;
  if (!opened_) {
    opened_ = true;
    nvml_ = GpuProcessMemory::Open();
  }
  return nvml_.get();
}

std::optional<double> DeviceNvml::Utilization() const {
  const GpuProcessMemory* nvml = Nvml();
  return nvml ? nvml->Utilization(*index_) : std::nullopt;
}

std::optional<int> DeviceNvml::ComputeMajor() const {
  const GpuProcessMemory* nvml = Nvml();
  if (nvml == nullptr) return std::nullopt;
  const auto capability = nvml->ComputeCapability(*index_);
  return capability ? std::make_optional(capability->first) : std::nullopt;
}

std::optional<std::pair<int, int>> DeviceNvml::ComputeCapability() const {
  const GpuProcessMemory* nvml = Nvml();
  return nvml == nullptr ? std::nullopt : nvml->ComputeCapability(*index_);
}

std::optional<std::string> DeviceNvml::Name() const {
  const GpuProcessMemory* nvml = Nvml();
  return nvml == nullptr ? std::nullopt : nvml->Name(*index_);
}

std::optional<int64_t> DeviceNvml::TotalMemory() const {
  const GpuProcessMemory* nvml = Nvml();
  return nvml == nullptr ? std::nullopt : nvml->TotalMemory(*index_);
}

std::optional<int64_t> DeviceNvml::UsedByThisProcess() const {
  const GpuProcessMemory* nvml = Nvml();
  return nvml ? nvml->UsedBy({getpid()}) : std::nullopt;
}

namespace {

// The fields of /proc/PID/stat after the command: state, parent, process group.
struct ProcStat {
  std::string state;
  long ppid = 0;  // NOLINT(runtime/int)
  long pgrp = 0;  // NOLINT(runtime/int)
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses; it ends at the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  ProcStat out;
  if (!(rest >> out.state >> out.ppid >> out.pgrp)) return std::nullopt;
  return out;
}

}  // namespace

bool InProcessGroup(pid_t pid, pid_t pgid) {
  const std::optional<ProcStat> s = ReadProcStat(pid);
  return s && s->pgrp == pgid && s->state != "Z" && s->state != "X";
}

std::optional<pid_t> ParentProcess(pid_t pid) {
  const std::optional<ProcStat> s = ReadProcStat(pid);
  if (!s) return std::nullopt;
  return static_cast<pid_t>(s->ppid);
}

}  // namespace tune
